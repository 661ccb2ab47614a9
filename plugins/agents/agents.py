"""Agents under test. Each takes the conversation so far and the tools, and returns one turn;
the harness runs the tool calls and comes back with their results.

- ``openai-tools``: the environment's prompt and tools on any OpenAI-compatible model (the
  ``agent`` model role), with native tool calling.
- ``http``: an endpoint of yours. IntellAgent POSTs ``{"messages": [...], "tools": [...],
  "conversation_id": "..."}`` (OpenAI chat format, system prompt first, tool results as
  ``role: tool`` messages; ``schemas/agent-request.schema.json``) and expects ``{"content": str |
  null, "tool_calls": [{"id", "name", "arguments"}]}`` (``schemas/agent-response.schema.json``,
  :class:`intellagent.agent.AgentResponse`).
  With ``tools: mcp`` the agent runs its own tool loop instead: each request also carries
  ``tools_url``, an MCP endpoint (streamable HTTP) serving the conversation's tools on its own
  database, and every call the agent makes there is recorded as the turn's tool calls.
- ``python``: ``module:callable`` called as ``fn(messages, tools)`` (sync or async), returning
  the reply text, or ``{"content": ..., "tool_calls": [{"name", "arguments"}]}``.
- ``a2a``: an agent speaking the Agent2Agent protocol (:mod:`.a2a_agent`), its tools over MCP.

HTTP and Python agents are black boxes: their answers may depend on more than what they are sent,
so their dialogs are reused only within a run and the runs resuming it, unless they declare a
``version`` (for ``python``, ``version: code`` hashes the files of the callable's package; an
endpoint may report one in an ``X-Agent-Version`` header or a ``version`` field).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

import aiohttp
from pydantic import Field, field_validator

from intellagent.agent import Agent, AgentSetup, AgentTurn, AgentUnavailable
from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError
from intellagent.redaction import Redactor
from intellagent.llm.types import ToolCall
from intellagent.model import HttpURL, StrictModel
from intellagent.offload import OffloadCrash, OffloadTimeout
from intellagent_plugins.agents.tool_endpoint import ServesTools, ToolServer, mcp_missing


def turn_from(data: Any) -> AgentTurn:
    """An agent's answer (text, or a dict with content and tool calls) as a turn."""
    if isinstance(data, AgentTurn):
        return data
    if isinstance(data, str):
        return AgentTurn(content=data)
    if not isinstance(data, dict):
        raise TypeError(f"expected text or an object with content and tool_calls, got {type(data).__name__}")
    calls = []
    for i, c in enumerate(data.get("tool_calls") or []):
        fn = c.get("function") if isinstance(c.get("function"), dict) else c
        arguments = fn.get("arguments", {})
        calls.append(ToolCall(id=str(c.get("id") or f"call_{i}"), name=fn["name"],
                              arguments=arguments if isinstance(arguments, str) else json.dumps(arguments)))
    content = data.get("content")
    return AgentTurn(content=content if content is None else str(content), tool_calls=calls)


class OpenAIToolsAgent(Agent):
    """The environment's prompt and tools on an OpenAI-compatible chat model."""

    roles = {"agent": "the model of the agent under test"}
    black_box = False  # its answers follow from its model requests, whose settings key them
    prepares_offline = True

    @classmethod
    async def prepare(cls, config: Any, env: Any) -> AgentSetup:
        return AgentSetup(identity="model")

    @property
    def turn_timeout(self) -> float | None:
        return None  # the model layer has its own timeouts and retries

    async def step(self, messages, tools):
        outcome = await self.ctx.llm.chat(messages, role="agent", tools=tools or None)
        if not outcome.ok:
            return AgentTurn(error=outcome.error, infra=True)
        reply = outcome.value
        return AgentTurn(content=reply.content, tool_calls=reply.tool_calls)


# -- http ------------------------------------------------------------------------------------------

class FromEnv(StrictModel):
    """A value read from an environment variable when the run starts (never written anywhere)."""

    env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


SECRET_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key", "cookie")


def no_literal_secrets(headers: dict[str, Any]) -> dict[str, Any]:
    """Headers from YAML, refused when a secret is written there rather than named."""
    for name, header in headers.items():
        if isinstance(header, str) and name.lower() in SECRET_HEADERS:
            raise ValueError(f"header {name}: secrets are not accepted in YAML; put it in an "
                             f"environment variable and write {{env: NAME}}")
    return headers


def header_values(headers: dict[str, str | FromEnv]) -> dict[str, str]:
    """The headers to send, secrets read from the environment now (:class:`AgentUnavailable`
    naming a variable that is not set)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if isinstance(value, FromEnv):
            if value.env not in os.environ:
                raise AgentUnavailable(f"header {name}: the environment variable {value.env} is not set")
            out[name] = os.environ[value.env]
        else:
            out[name] = value
    return out


def header_redactor(config: dict[str, str | FromEnv], headers: dict[str, str]) -> Redactor:
    """Masks, in an error to report, the values of the headers read from the environment (with
    and without their scheme) and any authorization value."""
    return Redactor(value for name, value in headers.items() if isinstance(config.get(name), FromEnv))


async def start_tool_server(env: Any) -> ToolServer:
    """The run's MCP endpoint serving ``env``'s tools, started (:class:`AgentUnavailable` when
    it cannot be)."""
    missing = mcp_missing()
    if missing:
        raise AgentUnavailable(f"an agent that runs its own tools {missing}")
    server = ToolServer(env)
    try:
        await server.start()
    except (OSError, RuntimeError) as exc:
        raise AgentUnavailable(str(exc)) from None
    return server


class HttpConfig(StrictModel):
    url: HttpURL = Field(description="The endpoint IntellAgent POSTs each turn to.")
    timeout: float = Field(default=60.0, gt=0, le=3600, description="Seconds per request.")
    retries: int = Field(default=2, ge=0, le=10, description="Retries of a request that could not "
                         "reach the agent (refused, DNS, timeout, HTTP 408, 429, 502, 503, 504), with "
                         "back-off.")
    headers: dict[str, str | FromEnv] = Field(default_factory=dict, description="Request headers; "
                                              "a secret comes from an environment variable: "
                                              "{Authorization: {env: AGENT_TOKEN}}.")
    version: str | None = Field(default=None, max_length=200, description="The agent's version: "
                                "its dialogs are then reused for the same version only.")
    health_url: HttpURL | None = Field(default=None, description="GET before "
                                   "the run instead of a one-message conversation.")
    max_connections: int = Field(default=64, ge=1, le=1024, description="Connections kept open "
                                 "to the endpoint for the whole run.")
    tools: Literal["harness", "mcp"] = Field(default="harness", description="harness: the agent "
                                             "returns tool calls and IntellAgent runs them; mcp: "
                                             "the agent runs its own tool loop, calling the "
                                             "conversation's tools at the tools_url each request "
                                             "carries (needs intellagent[mcp]).")

    @field_validator("headers")
    @classmethod
    def _no_literal_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        return no_literal_secrets(value)


class Declined(ValueError):
    """The endpoint answered with an error of the agent's own: a refused token, a wrong path (4xx),
    or its code crashing (500)."""


#: HTTP statuses that say the agent was not reached or could not be served (a request timeout,
#: a rate limit, a gateway or proxy failing, an overload), not that it answered: an infra error,
#: retried. Any other error status (a 500 with the agent's traceback, a 4xx) is its own answer.
ENDPOINT_FAULTS = frozenset({408, 429, 502, 503, 504})


class Unreachable(Exception):
    """The endpoint could not be reached (worth a retry); ``cause`` is the short reason."""

    def __init__(self, cause: str, detail: str = "") -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause


class HttpShared:
    """What one run's HTTP conversations share: the headers, one connection pool, and the MCP
    endpoint serving the tools of an agent that runs its own (``tools``)."""

    def __init__(self, config: HttpConfig, headers: dict[str, str]) -> None:
        self.config = config
        self.headers = headers
        self.redactor = header_redactor(config.headers, headers)
        self.session: aiohttp.ClientSession | None = None
        self.tools: ToolServer | None = None

    def client(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession(
                headers=self.headers, timeout=aiohttp.ClientTimeout(total=self.config.timeout),
                connector=aiohttp.TCPConnector(limit=self.config.max_connections))
        return self.session

    def redact(self, text: str) -> str:
        return self.redactor(text) or ""

    def redact_turn(self, turn: AgentTurn) -> AgentTurn:
        """The agent's answer without the secrets of its headers, should it echo them (a debug
        reply): its transcript is stored, reported and shown to the judges."""
        turn.content = self.redactor.known(turn.content)
        for call in turn.tool_calls:
            call.arguments = self.redactor.known(call.arguments) or call.arguments
        return turn

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def post(self, body: dict[str, Any]) -> tuple[Any, str | None]:
        """The endpoint's JSON answer and the version it reports; :class:`Unreachable` when it
        cannot be reached (after the retries), ValueError for its own refusal or nonsense."""
        url = self.config.url
        for attempt in range(self.config.retries + 1):
            try:
                async with self.client().post(url, json=body) as response:
                    text = await response.text()
                    if response.status in ENDPOINT_FAULTS:
                        raise Unreachable(f"HTTP {response.status}", self.redact(text[:200]))
                    if response.status >= 400:
                        raise Declined(f"the agent answered HTTP {response.status}: {self.redact(text[:300])}")
                    try:
                        data = json.loads(text)
                    except json.JSONDecodeError:
                        raise ValueError(f"the agent's answer is not JSON: {self.redact(text[:200])!r}") from None
                    version = response.headers.get("X-Agent-Version")
                    if version is None and isinstance(data, dict) and isinstance(data.get("version"), str):
                        version = data["version"]
                    return data, version
            except (Unreachable, aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError,
                    aiohttp.ClientOSError, asyncio.TimeoutError) as exc:
                failure = exc if isinstance(exc, Unreachable) else _unreachable(exc, self.config)
                if attempt >= self.config.retries:
                    raise failure from None
                await asyncio.sleep(min(0.5 * 2 ** attempt, 5.0))
        raise AssertionError("unreachable")


def _unreachable(exc: BaseException, config: HttpConfig) -> Unreachable:
    if isinstance(exc, asyncio.TimeoutError):
        return Unreachable("timeout", f"no answer within {config.timeout:g} s")
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or "Name or service not known" in str(exc):
        return Unreachable("DNS", str(exc))
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Unreachable("connection refused", str(exc.os_error or exc))
    return Unreachable("connection lost", str(exc))


class HttpAgent(ServesTools, Agent):
    """Your agent behind an HTTP endpoint (contract in the module docstring)."""

    Config = HttpConfig

    @classmethod
    def check(cls, config: HttpConfig) -> str | None:
        missing = mcp_missing() if config.tools == "mcp" else None
        return f"http agent with tools: mcp {missing}" if missing else None

    @classmethod
    async def prepare(cls, config: HttpConfig, env: Any) -> AgentSetup:
        shared = HttpShared(config, header_values(config.headers))
        setup = AgentSetup(shared=shared, describe=config.url, closers=[shared.close])
        try:
            if config.tools == "mcp":
                shared.tools = await start_tool_server(env)
                setup.closers.append(shared.tools.close)
            reported = await _preflight(shared, env)
        except BaseException:
            await setup.close()
            raise
        version = config.version or reported
        setup.identity = f"version:{version}" if version else None
        return setup

    @property
    def runs_own_tools(self) -> bool:
        return self.config.tools == "mcp"

    @property
    def turn_timeout(self) -> float | None:
        return None  # each request has the timeout, and retries have their own back-off

    def _shared(self) -> HttpShared:
        shared = self.setup.shared
        if shared is None:  # a step run on its own, outside a run
            shared = self.setup.shared = HttpShared(self.config, {})
        return shared

    async def step(self, messages, tools):
        shared = self._shared()
        conversation = f"{getattr(self.ctx, 'run_id', '') or 'run'}:{getattr(self.ctx, 'item', '') or id(self)}"
        body = {"messages": messages, "tools": tools, "conversation_id": conversation}
        if self.runs_own_tools:
            if self.tools_dialog is None:
                return AgentTurn(error="the agent runs its own tools, which only a live dialog "
                                       "serves (this step replays turns)", infra=True)
            body["tools_url"] = self.tools_dialog.url
        try:
            with self.tools_turn():
                data, _ = await shared.post(body)
            return shared.redact_turn(turn_from(data))
        except Unreachable as exc:
            return AgentTurn(error=f"agent unreachable ({exc.cause}): {shared.redact(str(exc))} "
                                   f"[{self.config.url}]", infra=True)
        except Declined as exc:
            return AgentTurn(error=str(exc))
        except (KeyError, TypeError, ValueError) as exc:
            return AgentTurn(error=f"the agent's answer is not a turn: {shared.redact(str(exc))}")


async def _preflight(shared: HttpShared, env: Any) -> str | None:
    """A health request, or a one-message conversation whose answer must parse as a turn; the
    version the endpoint reports."""
    config = shared.config
    try:
        if config.health_url:
            try:
                async with shared.client().get(config.health_url) as response:
                    text = await response.text()
                    if response.status >= 400:
                        raise AgentUnavailable(f"{config.health_url} answered HTTP {response.status}")
                    version = response.headers.get("X-Agent-Version")
                    if version is None:
                        try:
                            data = json.loads(text)
                            version = data.get("version") if isinstance(data, dict) else None
                        except json.JSONDecodeError:
                            pass
                    return version if isinstance(version, str) else None
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise _unreachable(exc, config) from None
        tools = [t.openai_schema() for t in env.tools.values()] if env is not None else []
        body = {"messages": [{"role": "system", "content": env.prompt if env is not None else ""},
                             {"role": "user", "content": "Hello."}],
                "tools": tools, "conversation_id": "intellagent-preflight"}
        if shared.tools is None:
            data, version = await shared.post(body)
        else:  # an agent running its own tools may call them: on a throwaway seed database
            async with shared.tools.throwaway() as dialog:
                body["tools_url"] = dialog.url
                with dialog.turn():
                    data, version = await shared.post(body)
        turn_from(data)
        return version
    except Unreachable as exc:
        raise AgentUnavailable(f"{config.url}: {shared.redact(str(exc))}") from None
    except Declined as exc:
        raise AgentUnavailable(f"{config.url}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise AgentUnavailable(f"{config.url}: its answer to a one-message conversation is not a "
                               f"turn: {shared.redact(str(exc))}") from None


# -- python ----------------------------------------------------------------------------------------

class PythonConfig(StrictModel):
    callable: str = Field(description="'module:function' or 'file.py:function'.")
    timeout: float = Field(default=60.0, gt=0, le=3600, description="Seconds one turn may take.")
    version: str | None = Field(default=None, max_length=200, description="The agent's version: its "
                                "dialogs are then reused for the same version only. `code`: the "
                                "hash of its package's files (code, prompts, data), so an edit "
                                "makes new dialogs.")


def code_version(fn: Any) -> str:
    """A hash of ``fn``'s top-level package (every file under it: its code and the prompts or data
    it reads, not Python's bytecode caches nor hidden files), or of its module's file when it is
    not in a package."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = Path(inspect.getsourcefile(fn) or "")
    top = (getattr(module, "__package__", "") or "").split(".")[0] if module else ""
    files, root = [path], path.parent
    if top and top in sys.modules and getattr(sys.modules[top], "__file__", None):
        root = Path(sys.modules[top].__file__).parent
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".pyc", ".pyo")
                       and not any(part == "__pycache__" or part.startswith(".")
                                   for part in p.relative_to(root).parts))
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


class PythonAgent(Agent):
    """A Python function of yours: ``fn(messages, tools)``."""

    Config = PythonConfig

    def __init__(self, config: PythonConfig, ctx: Any, ground_truth: Any = None) -> None:
        super().__init__(config, ctx, ground_truth)
        try:
            self.fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            raise ConfigError(f"python agent: {exc}", item="agent") from None

    @classmethod
    def check(cls, config: PythonConfig) -> str | None:
        try:
            fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            return f"python agent: {exc}"
        return None if callable(fn) else f"python agent: '{config.callable}' is not callable"

    @classmethod
    async def prepare(cls, config: PythonConfig, env: Any) -> AgentSetup:
        try:
            fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            raise AgentUnavailable(f"{config.callable}: {exc}") from None
        if not callable(fn):
            raise AgentUnavailable(f"{config.callable} is not callable")
        try:
            inspect.signature(fn).bind(None, None)
        except TypeError:
            raise AgentUnavailable(f"{config.callable} does not take (messages, tools)") from None
        except ValueError:
            pass  # a builtin without a signature: it will tell at the first turn
        version = code_version(fn) if config.version == "code" else config.version
        return AgentSetup(identity=f"version:{version}" if version else None, describe=config.callable)

    async def step(self, messages, tools):
        offload = getattr(self.ctx, "offload", None)
        if inspect.iscoroutinefunction(self.fn) or offload is None:
            result = self.fn(messages, tools)
            if inspect.isawaitable(result):
                result = await result
        else:
            try:  # a sync agent in a thread: it never holds up the other conversations
                result = await offload.run(self.fn, messages, tools, timeout=self.config.timeout)
            except OffloadTimeout:
                return AgentTurn(error=f"the agent did not answer within {self.config.timeout:g} s")
            except OffloadCrash as exc:  # the agent's own failure: reported, the run goes on
                return AgentTurn(error=str(exc))
        try:
            return turn_from(result)
        except (KeyError, TypeError, ValueError) as exc:
            return AgentTurn(error=f"the agent's answer is not a turn: {exc}")
