"""``a2a``: an agent speaking the Agent2Agent protocol (A2A 1.0, through the ``a2a-sdk`` package).

Before the run IntellAgent reads the agent's card (``<url>/.well-known/agent-card.json``): an agent
whose card cannot be read or offers no JSON-RPC interface stops the run there. Each user message
of a dialog is sent as an A2A message (its text), continuing the agent's context (and its task,
while the task waits for input); the reply is the text of the agent's message, or of the task's
status message (or its artifacts). The agent keeps the conversation's history itself.

Its tools: the agent runs its own tool loop against the conversation's tools served over MCP
(:mod:`.tool_endpoint`). Every message carries the endpoint in its metadata and in the request's,
under ``"intellagent/mcp": {"url": ..., "transport": "streamable_http"}``; each call the agent
makes there is recorded as the turn's tool calls, on the conversation's own database.

The agent is a black box, whose version is its card's (``version`` overrides it): its dialogs
are reused for the same version only. Install with ``pip install 'intellagent[a2a]'``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field, field_validator

from intellagent.agent import Agent, AgentSetup, AgentTurn, AgentUnavailable
from intellagent.model import HttpURL, StrictModel
from intellagent.redaction import Redactor
from intellagent_plugins.agents.agents import (ENDPOINT_FAULTS, FromEnv, Unreachable, header_redactor,
                                               header_values, no_literal_secrets, start_tool_server)
from intellagent_plugins.agents.tool_endpoint import ServesTools, ToolServer, mcp_missing

MCP_KEY = "intellagent/mcp"
A2A_MISSING = "needs the a2a-sdk package: pip install 'intellagent[a2a]'"


def a2a_missing() -> str | None:
    """Why an A2A agent cannot be used here, or None."""
    try:
        import a2a.client  # noqa: F401
    except ImportError:
        return A2A_MISSING
    return mcp_missing()


class A2AConfig(StrictModel):
    url: HttpURL = Field(description="The agent's base URL (its card is at "
                     "/.well-known/agent-card.json under it).")
    timeout: float = Field(default=120.0, gt=0, le=3600, description="Seconds per message (the "
                           "agent's own tool calls included).")
    retries: int = Field(default=2, ge=0, le=10, description="Retries of a message that could "
                         "not reach the agent (refused, timeout, HTTP 408, 429, 502, 503, 504), with "
                         "back-off.")
    headers: dict[str, str | FromEnv] = Field(default_factory=dict, description="Request headers; "
                                              "a secret comes from an environment variable: "
                                              "{Authorization: {env: AGENT_TOKEN}}.")
    version: str | None = Field(default=None, max_length=200, description="The agent's version "
                                "(default: its card's): its dialogs are reused for the same "
                                "version only.")
    max_connections: int = Field(default=64, ge=1, le=1024, description="Connections kept open "
                                 "to the agent for the whole run.")

    @field_validator("headers")
    @classmethod
    def _no_literal_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return no_literal_secrets(value)


class A2AShared:
    """What one run's A2A conversations share: one HTTP pool and client, the MCP endpoint."""

    def __init__(self, http: Any, client: Any, tools: ToolServer, redactor: Redactor) -> None:
        self.http, self.client, self.tools, self.redactor = http, client, tools, redactor

    def redact(self, text: str) -> str:
        return self.redactor(text) or ""


def _unreachable(exc: BaseException) -> Unreachable | None:
    """The cause when ``exc`` (from the a2a client) means the agent could not be reached."""
    import httpx
    from a2a.client import A2AClientTimeoutError

    if isinstance(exc, A2AClientTimeoutError) or isinstance(exc.__cause__, httpx.TimeoutException):
        return Unreachable("timeout", str(exc))
    cause = exc.__cause__
    if isinstance(cause, httpx.ConnectError):
        return Unreachable("connection refused", str(cause))
    if isinstance(cause, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return Unreachable("connection lost", str(cause))
    if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code in ENDPOINT_FAULTS:
        return Unreachable(f"HTTP {cause.response.status_code}", str(cause))
    return None


class A2AAgent(ServesTools, Agent):
    """Your agent behind an A2A endpoint (contract in the module docstring)."""

    Config = A2AConfig
    runs_own_tools = True

    def __init__(self, config: A2AConfig, ctx: Any, ground_truth: Any = None) -> None:
        super().__init__(config, ctx, ground_truth)
        self.sent = 0  # the conversation's messages sent so far
        self.turns = 0
        self.context_id = ""
        self.task_id = ""

    @classmethod
    def check(cls, config: A2AConfig) -> str | None:
        missing = a2a_missing()
        return f"a2a agent {missing}" if missing else None

    @classmethod
    async def prepare(cls, config: A2AConfig, env: Any) -> AgentSetup:
        missing = a2a_missing()
        if missing:
            raise AgentUnavailable(f"the a2a agent {missing}")
        import httpx
        from a2a.client import A2ACardResolver, AgentCardResolutionError, ClientConfig, ClientFactory

        headers = header_values(config.headers)
        redactor = header_redactor(config.headers, headers)
        http = httpx.AsyncClient(headers=headers, timeout=config.timeout,
                                 limits=httpx.Limits(max_connections=config.max_connections))
        setup = AgentSetup(describe=config.url, closers=[http.aclose])
        try:
            try:
                card = await A2ACardResolver(http, config.url).get_agent_card()
            except AgentCardResolutionError as exc:
                found = _unreachable(exc)
                cause = found.cause if found else (f"HTTP {exc.status_code}" if exc.status_code else str(exc))
                raise AgentUnavailable(f"{config.url}: cannot read its agent card ({cause})") from None
            try:
                client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            except ValueError as exc:
                raise AgentUnavailable(f"{config.url}: its card offers no interface IntellAgent "
                                       f"speaks (JSON-RPC): {exc}") from None
            tools = await start_tool_server(env)
            setup.closers.append(tools.close)
        except BaseException:
            await setup.close()
            raise
        setup.shared = A2AShared(http, client, tools, redactor)
        version = config.version or card.version
        setup.identity = f"version:{version}" if version else None
        return setup

    @property
    def turn_timeout(self) -> float | None:
        return None  # each message has the timeout, and retries have their own back-off

    async def step(self, messages, tools):
        shared = self.setup.shared
        if not isinstance(shared, A2AShared):
            return AgentTurn(error="the a2a agent was not prepared for a run", infra=True)
        if self.tools_dialog is None:
            return AgentTurn(error="the agent runs its own tools, which only a live dialog serves "
                                   "(this step replays turns)", infra=True)
        from a2a.utils.errors import A2AError
        from google.protobuf.json_format import ParseError

        new, self.sent = messages[self.sent:], len(messages)
        text = "\n".join(m["content"] for m in new if m.get("role") == "user" and m.get("content"))
        self.turns += 1
        for attempt in range(self.config.retries + 1):
            try:
                with self.tools_turn():
                    turn = await self._send(shared, text)
                turn.content = shared.redactor.known(turn.content)  # should it echo its headers' secrets
                return turn
            except (A2AError, ParseError, ValueError) as exc:  # out of reach, or the agent's own error
                failure = _unreachable(exc)
                if failure is None:
                    return AgentTurn(error=f"the agent answered with an error: "
                                           f"{shared.redact(f'{type(exc).__name__}: {exc}')}")
                if attempt >= self.config.retries:
                    return AgentTurn(error=f"agent unreachable ({failure.cause}): "
                                           f"{shared.redact(str(failure))} [{self.config.url}]", infra=True)
                await asyncio.sleep(min(0.5 * 2 ** attempt, 5.0))
        raise AssertionError("unreachable")

    async def _send(self, shared: A2AShared, text: str) -> AgentTurn:
        from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

        endpoint = {MCP_KEY: {"url": self.tools_dialog.url, "transport": "streamable_http"}}
        message = Message(role=Role.ROLE_USER, message_id=f"{self._conversation()}:{self.turns}",
                          parts=[Part(text=text)])
        message.metadata.update(endpoint)
        if self.context_id:
            message.context_id = self.context_id
        if self.task_id:
            message.task_id = self.task_id
        request = SendMessageRequest(message=message)
        request.metadata.update(endpoint)
        last = None
        async for event in shared.client.send_message(request):
            last = event
        kind = last.WhichOneof("payload") if last is not None else None
        if kind == "message":
            self.context_id = last.message.context_id or self.context_id
            return AgentTurn(content=_text(last.message.parts))
        if kind != "task":
            return AgentTurn(error=f"the agent's answer is neither a message nor a task ({kind})")
        task = last.task
        self.context_id = task.context_id or self.context_id
        state = task.status.state
        reply = _text(task.status.message.parts)
        if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            self.task_id = task.id
            return AgentTurn(content=reply)
        self.task_id = ""
        if state == TaskState.TASK_STATE_COMPLETED:
            if not reply and task.artifacts:
                reply = "\n".join(_text(a.parts) for a in task.artifacts)
            return AgentTurn(content=reply)
        return AgentTurn(error=f"the agent's task ended {TaskState.Name(state)}"
                               + (f": {reply}" if reply else ""))

    def _conversation(self) -> str:
        return f"{getattr(self.ctx, 'run_id', '') or 'run'}:{getattr(self.ctx, 'item', '') or id(self)}"


def _text(parts: Any) -> str:
    return "\n".join(p.text for p in parts if p.WhichOneof("content") == "text")

