"""The agent under test: one model turn at a time, tools executed by whoever drives it.

An agent gets the conversation so far (OpenAI chat messages, the environment's prompt first, tool
results as ``role: tool`` messages) and the tools it may call, and returns one turn: a reply, or
tool calls to make, or an error. It never runs tools and never owns the history, so a live dialog
(:class:`~intellagent.session.LiveSession`) and a replay of a ground-truth conversation drive
the same agent. Agents under test are built without the item's ground truth; a reference agent
that needs it (an oracle for testing the harness) says so with ``needs_ground_truth``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from intellagent.llm.types import ToolCall
from intellagent.steps import NoOptions


class AgentTurn(BaseModel):
    """One turn of the agent: text and/or tool calls to make, or an error."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    error: str | None = Field(default=None, description="The agent failed: crashed, answered "
                                                        "badly, or its endpoint did.")
    infra: bool = Field(default=False, description="The failure was IntellAgent's own model "
                                                   "infrastructure, not the agent.")

    def as_message(self) -> dict[str, Any]:
        """The turn as an assistant message of the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls]
        return message


class Agent:
    """Base class of agent plugins (registered with ``register_agents``).

    ``Config`` is the options model; ``roles`` the LLM roles the agent calls (the built-in
    ``openai-tools`` declares ``agent``). ``ctx`` is the step context of the step talking to the
    agent; ``ground_truth`` is None unless ``needs_ground_truth`` is set.
    """

    Config: ClassVar[type] = NoOptions
    roles: ClassVar[dict[str, str]] = {}
    needs_ground_truth: ClassVar[bool] = False

    def __init__(self, config: Any, ctx: Any, ground_truth: Any = None) -> None:
        self.config = config
        self.ctx = ctx
        self.ground_truth = ground_truth

    @classmethod
    def check(cls, config: Any) -> str | None:
        """A problem with ``config`` found before any model call (e.g. a callable that does not
        import), or None."""
        return None

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        raise NotImplementedError
