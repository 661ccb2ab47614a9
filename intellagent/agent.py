"""The agent under test: one model turn at a time, tools executed by whoever drives it.

An agent gets the conversation so far (OpenAI chat messages, the environment's prompt first, tool
results as ``role: tool`` messages) and the tools it may call, and returns one turn: a reply, or
tool calls to make, or an error. It never runs tools and never owns the history, so a live dialog
(:class:`~intellagent.session.LiveSession`) and a replay of a ground-truth conversation drive
the same agent. Agents under test are built without the item's ground truth; a reference agent
that needs it (an oracle for testing the harness) says so with ``needs_ground_truth``.

Before a run's first paid call, :meth:`Agent.prepare` checks that the agent can be used (a
pre-flight request to an endpoint, a callable that imports and takes ``(messages, tools)``),
opens what its conversations share (a connection pool) and says what the agent *is*: its
identity. Results that depend on the agent are keyed by it. An agent whose answers may depend on
more than what it is sent (a service, a remote model, a prompt file of its own) is a black box:
without a declared version its dialogs are never reused from a finished run.

An agent that runs its own tool loop (most deployed agents) says so with ``runs_own_tools``: the
live session hands it the conversation's toolbox (:meth:`Agent.attach`), its plugin serves those
tools to it (over MCP), and every call it makes there is recorded as the turn's tool calls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from intellagent.errors import IntellagentError
from intellagent.events import AgentTurnDone, Clock
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


class WireToolCall(BaseModel):
    """A tool call as an agent writes it on the wire."""

    id: str | None = Field(default=None, description="Its id; the result comes back under it.")
    name: str = Field(description="The tool's name.")
    arguments: dict[str, Any] | str = Field(default_factory=dict, description="The arguments: an "
                                            "object, or its JSON text.")


class AgentRequest(BaseModel):
    """What IntellAgent sends an agent behind an endpoint, once per turn."""

    messages: list[dict[str, Any]] = Field(description="The conversation so far in OpenAI chat "
                                           "format: the environment's prompt as the system "
                                           "message, then user, assistant (with tool_calls) and "
                                           "tool (tool_call_id, content) messages.")
    tools: list[dict[str, Any]] = Field(description="The tools it may call, as OpenAI function "
                                        "definitions.")
    conversation_id: str = Field(description="The same for every turn of one conversation.")
    tools_url: str | None = Field(default=None, description="For an agent that runs its own tool "
                                  "loop: the MCP endpoint (streamable HTTP) serving this "
                                  "conversation's tools on its own database.")


class AgentResponse(BaseModel):
    """What an agent behind an endpoint answers: a reply, or tool calls to make."""

    content: str | None = Field(default=None, description="Its reply to the user, or null when it "
                                "only calls tools.")
    tool_calls: list[WireToolCall] = Field(default_factory=list, description="Tool calls to make; "
                                           "their results come in the next request.")
    version: str | None = Field(default=None, description="Optional: the agent's version. Its "
                                "dialogs are then reused for the same version only (also read "
                                "from an X-Agent-Version header).")


class AgentUnavailable(Exception):
    """The agent cannot be used: its endpoint cannot be reached or answers nonsense, its callable
    does not import. Raised by :meth:`Agent.prepare`; the run stops before any model call."""


@dataclass
class AgentSetup:
    """What an agent kind prepared for one run.

    ``identity`` says what the agent is, beyond its plugin and options: a version (declared,
    reported by its endpoint, the hash of its code), ``model`` for an agent whose answers follow
    from its model requests (whose settings key the results already), or None for a black box.
    ``shared`` is what its conversations share (a connection pool), closed with :meth:`close`.
    ``describe`` is how reports name the agent (its endpoint, its callable)."""

    identity: str | None = None
    shared: Any = None
    describe: str = ""
    closers: list[Any] = field(default_factory=list)

    async def close(self) -> None:
        for close in self.closers:
            result = close()
            if asyncio.iscoroutine(result):
                await result


class Agent:
    """Base class of agent plugins (registered with ``register_agents``).

    ``Config`` is the options model; ``roles`` the LLM roles the agent calls (the built-in
    ``openai-tools`` declares ``agent``). ``ctx`` is the step context of the step talking to the
    agent; ``ground_truth`` is None unless ``needs_ground_truth`` is set; ``setup`` is what
    :meth:`prepare` made for the run. ``black_box``: the agent's answers may depend on more than
    what it is sent (a default for any agent of a third party; model-backed and reference
    agents are not). ``runs_own_tools``: the agent calls the environment's tools itself rather
    than returning tool calls for the harness to run (a class attribute, or a property when an
    option decides)."""

    Config: ClassVar[type] = NoOptions
    roles: ClassVar[dict[str, str]] = {}
    needs_ground_truth: ClassVar[bool] = False
    black_box: ClassVar[bool] = True
    runs_own_tools: bool = False
    #: :meth:`prepare` touches nothing outside this process (no request, no import of the
    #: user's code): ``run --estimate``, which contacts nothing, calls it to learn the agent's
    #: identity. Off unless an agent says so; the base class's own prepare is local.
    prepares_offline: ClassVar[bool] = False

    def __init__(self, config: Any, ctx: Any, ground_truth: Any = None) -> None:
        self.config = config
        self.ctx = ctx
        self.ground_truth = ground_truth
        self.setup: AgentSetup = AgentSetup()

    @classmethod
    def check(cls, config: Any) -> str | None:
        """A problem with ``config`` found before any model call (e.g. a callable that does not
        import), or None."""
        return None

    @classmethod
    async def prepare(cls, config: Any, env: Any) -> AgentSetup:
        """Before a run's first paid call: check the agent can be used (raise
        :class:`AgentUnavailable` naming the cause), open what its conversations share, and say
        what it is. By default: a black box unless the class says otherwise."""
        return AgentSetup(identity=None if cls.black_box else "deterministic")

    @property
    def turn_timeout(self) -> float | None:
        """Seconds one turn may take (the ``timeout`` option, when the agent has one)."""
        return getattr(self.config, "timeout", None)

    def attach(self, toolbox: Any) -> None:
        """For an agent that runs its own tools: the conversation's toolbox (a
        :class:`~intellagent.session.ToolBox` on its database), before its first turn. The calls
        the agent makes go through it (recorded, validated, under their timeouts)."""

    def detach(self) -> None:
        """The conversation is over: the agent can no longer reach its toolbox."""

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        raise NotImplementedError


class GuardedAgent:
    """An agent as every step talks to it: a turn that raises (a bug in the agent's code or its
    plugin) or outlasts the agent's ``timeout`` is that turn's agent-error, never a crashed run.
    Everything else is the agent's own."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        clock = Clock()
        turn = await self._step(messages, tools)
        observe = getattr(getattr(self.agent, "ctx", None), "observe", None)
        if observe is not None:
            observe(AgentTurnDone(started=clock.started, seconds=clock.seconds,
                                  tool_calls=len(turn.tool_calls), error=turn.error))
        return turn

    async def _step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        timeout = getattr(self.agent, "turn_timeout", None)
        try:
            return await asyncio.wait_for(self._exits_caught(messages, tools), timeout)
        except IntellagentError:
            raise
        except TimeoutError:
            return AgentTurn(error=f"the agent did not answer within {timeout:g} s")
        except Exception as exc:
            return AgentTurn(error=f"the agent raised {type(exc).__name__}: {exc}")

    async def _exits_caught(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        # sys.exit in an agent's code ends its turn, not the run: caught here, inside the task,
        # since asyncio raises a task's SystemExit out of the event loop itself
        try:
            return await self.agent.step(messages, tools)
        except SystemExit as exc:
            return AgentTurn(error=f"the agent raised SystemExit: {exc}")


class BrokenAgent:
    """An agent whose construction raised: every turn is that agent-error."""

    def __init__(self, error: BaseException, message: str | None = None) -> None:
        self.error = message or f"the agent could not be made: {type(error).__name__}: {error}"

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        return AgentTurn(error=self.error)
