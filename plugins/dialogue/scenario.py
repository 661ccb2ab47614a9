"""What a simulated user plays against the agent: a :class:`Scenario`. Pipelines subclass it
with what their personas and critics read (IntellAgent's event adds the policies under test,
τ-bench's task event the task it replays)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, Field

from intellagent.environment import Row


class Action(BaseModel):
    """One tool call a correct agent makes."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict, validation_alias=AliasChoices(
        "arguments", "kwargs"), description="The tool's arguments (τ-bench's files say kwargs).")


class GroundTruth(BaseModel):
    """What a correct agent does: its tool calls in order, and what it must say."""

    actions: list[Action] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list, description="Strings the agent's replies "
                               "must contain (case and thousands separators aside).")


class Scenario(BaseModel):
    """A brief for the simulated user, what it may tell, the rows put on top of the
    environment's seed data for this conversation, and optionally the ground truth (shown only
    to reference agents that declare they need it, and to state checks)."""

    id: str
    brief: str = Field(default="", description="What the user wants and how they behave, in the "
                       "second person.")
    user_knowledge: str = Field(default="", description="Facts the simulated user may state.")
    rows: list[Row] = Field(default_factory=list, description="Rows of this conversation's own "
                            "database, on top of the environment's seed data.")
    ground_truth: GroundTruth | None = None
