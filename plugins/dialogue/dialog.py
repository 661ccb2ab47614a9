"""A simulated conversation as it happened: every turn (the user's thoughts, the agent's tool
calls with their results), why it stopped, and what it did to the database."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from intellagent.session import ToolCallRecord


class Turn(BaseModel):
    role: Literal["user", "assistant", "tool", "critic"]
    content: str | None = None
    thought: str | None = Field(default=None, description="The simulated user's private thought.")
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    delivered: bool = Field(default=True, description="False for a user's closing message, which "
                                                       "never reached the agent.")


class Replayed(BaseModel):
    """How a replayed dialog went against its recording (``intellagent replay``)."""

    run: str = Field(description="The run whose recorded dialog was replayed.")
    departed: int | None = Field(default=None, description="The agent's turn (1 = its first reply) "
                                 "at which it first answered otherwise than the recorded agent, or "
                                 "the recording ran out; the simulated user took over from there. "
                                 "None: it followed the recording to the end.")
    why: str = Field(default="", description="What differed.")


StopReason = Literal["success", "failure", "give-up", "max-turns", "transfer", "agent-error",
                     "infra-error", "invalid-output"]


class Dialog(BaseModel):
    """A simulated conversation: its turns, why it stopped, and what it did to the database."""

    id: str
    turns: list[Turn] = Field(default_factory=list)
    stop_reason: StopReason = "max-turns"
    stop_explanation: str = ""
    error: str | None = None
    final_hash: str | None = None
    db_diff: dict[str, Any] | None = Field(default=None, description="Initial → final database.")
    tool_errors: int = Field(default=0, description="Tool calls that were refused or crashed.")
    warnings: list[str] = Field(default_factory=list, description="Signs of a broken setup, e.g. "
                                "tool calls written as text.")
    replay: Replayed | None = Field(default=None, description="For a replayed dialog that departed "
                                    "from its recording: where and why (one that followed it to the "
                                    "end is the recorded dialog, as it was).")

    def replies(self) -> list[str]:
        """What the agent said, turn by turn."""
        return [t.content or "" for t in self.turns if t.role == "assistant"]
