"""What ToolTalk's pipelines pass between steps: conversations in ToolTalk's own format, the
replay of a conversation against the agent under test, and the assessment of its calls."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Request(BaseModel):
    api_name: str
    parameters: dict[str, Any] | None = Field(description="None when the agent's arguments could "
                                                          "not be read.")


class ApiCall(BaseModel):
    """A tool call with what it gave: ToolTalk's ``{request, response, exception}``."""

    request: Request
    response: Any = None
    exception: str | None = None


class Turn(BaseModel):
    model_config = ConfigDict(extra="allow")

    index: int = Field(default=-1, description="The file's own number for the turn (filled in "
                                              "where a file leaves it out). Files are not always "
                                              "consistent, so the pipeline counts turns by position.")
    role: Literal["user", "assistant"]
    text: str | None = None
    apis: list[ApiCall] | None = Field(default=None, description="The ground-truth calls an "
                                       "assistant turn makes before its text.")


class Conversation(BaseModel):
    """A ToolTalk conversation (the JSON of its ``data/`` folders), plus the set it came from."""

    model_config = ConfigDict(extra="allow")

    name: str
    conversation_id: str = ""
    set: str = Field(default="", description="easy, hard, or the name of another collection.")
    suites_used: list[str] = Field(default_factory=list)
    apis_used: list[str] = Field(default_factory=list)
    scenario: str | None = None
    user: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict, description="location, timestamp "
                                     "(YYYY-MM-DD HH:MM:SS), and username when logged in.")
    conversation: list[Turn]

    @model_validator(mode="after")
    def _number_turns(self) -> "Conversation":
        for position, turn in enumerate(self.conversation):
            if turn.index < 0:
                turn.index = position
        return self

    @property
    def id(self) -> str:
        return self.name

    def calls(self) -> list[tuple[int, ApiCall]]:
        """Every ground-truth call with the position of its turn, in order."""
        return [(i, c) for i, t in enumerate(self.conversation) for c in (t.apis or [])]

    def reference_json(self) -> dict[str, Any]:
        """The conversation as ToolTalk writes it (without our ``set``; a file's keys as read)."""
        data = self.model_dump(mode="json", exclude={"set"}, exclude_unset=True)
        for turn in data["conversation"]:
            if turn.get("apis", ()) is None:  # ToolTalk expects the key only on turns with calls
                del turn["apis"]
        return data


class TurnReplay(BaseModel):
    """What the agent did in one assistant turn of the replay."""

    index: int = Field(description="The turn's position in the conversation (from 0).")
    predictions: list[ApiCall] = Field(default_factory=list, description="The calls it made, as "
                                       "executed (with the session token the harness supplied).")
    text: str | None = Field(default=None, description="Its reply; None if it never replied.")
    error: str | None = Field(default=None, description="The agent failed in this turn.")
    stopped: bool = Field(default=False, description="Cut off after the most calls a turn may make.")


class Replay(BaseModel):
    """A conversation replayed turn by turn against the agent under test."""

    id: str
    name: str
    set: str = ""
    turns: list[TurnReplay] = Field(default_factory=list)


class PredictionVerdict(BaseModel):
    turn: int
    call: ApiCall
    action: bool
    match: bool
    ground_truth: int | None = Field(default=None, description="Position of the ground-truth "
                                     "call it matched, in conversation order.")
    bad_action: bool = Field(description="An action that succeeded and matched nothing.")
    why: str = Field(default="", description="Why it matched nothing (against the first "
                                             "remaining ground-truth call of that tool).")


class TruthVerdict(BaseModel):
    turn: int
    call: ApiCall
    match: bool
    prediction: int | None = Field(default=None, description="Position of the prediction that "
                                   "matched it.")


class Counters(BaseModel):
    """ToolTalk's per-conversation counters and metrics, with its zero-denominator conventions."""

    predictions: int
    ground_truths: int
    matches: int
    actions: int
    valid_actions: int
    bad_actions: int
    precision: float
    recall: float
    action_precision: float
    bad_action_rate: float
    success: bool
    soft_success: float
    agent_error: bool = Field(default=False, description="The agent crashed in some turn: then "
                              "no success and no soft success, whatever its calls.")


class TurnSummary(BaseModel):
    index: int
    role: str
    text: str | None = None
    reply: str | None = Field(default=None, description="The agent's reply in this turn.")
    error: str | None = None


class Assessment(BaseModel):
    """Every prediction and every ground-truth call of a conversation, matched."""

    id: str
    name: str
    set: str = ""
    turns: list[TurnSummary] = Field(default_factory=list)
    predictions: list[PredictionVerdict] = Field(default_factory=list)
    ground_truth: list[TruthVerdict] = Field(default_factory=list)
    metrics: Counters
    agent_error: str | None = Field(default=None, description="The first turn where the agent "
                                    "crashed, and how.")
    comparator: str = ""
    corrected: bool = False
