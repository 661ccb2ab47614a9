"""Any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM
proxy): chat completions over aiohttp, answers read into the ``openai`` package's types, and
``instructor`` for structured outputs."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from typing import Any
from urllib.parse import urlparse

import aiohttp
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from intellagent import jsontext
from intellagent.llm.errors import (ConnectionLost, MalformedResponse, ProviderError, RateLimited,
                                    RealModelForbidden, RequestTimeout, ServerError, rejected)
from intellagent.llm.types import ChatReply, ChatRequest, ToolCall, Usage
from intellagent.pipeline import ModelSettings
from intellagent.pipeline import is_loopback as _is_local
from intellagent_plugins.providers.instructed import DEFAULT_TIMEOUT, Instructed, instructed
from intellagent_plugins.providers.instructed import first_line as _first_line
from intellagent_plugins.providers.instructed import short as _short

OPENAI_API = "https://api.openai.com/v1"
USER_AGENT = "intellagent (OpenAI-compatible client)"

__all__ = ["OpenAIProvider", "instructed"]


class OpenAIProvider(Instructed):
    """Chat (with tool calling) and structured output over HTTP."""

    cacheable = True

    def __init__(self, settings: ModelSettings, *, seed: int = 0) -> None:
        base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL")
        if os.environ.get("INTELLAGENT_OFFLINE") and not _is_local(base_url):
            raise RealModelForbidden(
                f"model '{settings.model}' at {base_url or 'the OpenAI API'} is not local and "
                "INTELLAGENT_OFFLINE is set (tests may only use mock/... models or 127.0.0.1)")
        key_var = settings.api_key_env or "OPENAI_API_KEY"
        api_key = os.environ.get(key_var)
        if not api_key:
            if not _is_local(base_url):
                raise RealModelForbidden(f"no API key for model '{settings.model}': set {key_var}")
            api_key = "local"
        self.model = settings.model
        self.base_url = base_url
        self._url = (base_url or OPENAI_API).rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                         "User-Agent": USER_AGENT}
        # every request of ours is cut at the role's limit (the LLM layer passes it in)
        self.timeout = settings.timeout or DEFAULT_TIMEOUT
        self._timeout = aiohttp.ClientTimeout(total=self.timeout)
        # an output cap sized from the response model for structured calls, except on the
        # OpenAI API itself (its reasoning models refuse max_tokens and count their reasoning in it)
        self._cap_output = base_url is not None and urlparse(base_url).hostname != "api.openai.com"
        self._proxy = _proxy_for(self._url)
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        # auto: the OpenAI API itself is known to take a forced tool call; any other endpoint
        # is probed once (per process) and the first mode that works is kept
        self.mode: str | None = settings.structured if settings.structured != "auto" else (
            "tools" if base_url is None else None)
        self._probe_lock: asyncio.Lock | None = None

    def _session(self) -> aiohttp.ClientSession:
        """HTTP connections belong to one event loop: one session per loop that uses us."""
        loop = asyncio.get_running_loop()
        if loop not in self._sessions:
            self._forget_closed_loops()
            # no connection cap of its own (the LLM layer's semaphore decides how many requests
            # are in flight), and no trust_env: aiohttp would read the proxy variables and
            # ~/.netrc in a thread on every request; _proxy_for read them once
            self._sessions[loop] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                                         timeout=self._timeout)
        return self._sessions[loop]

    async def _post(self, session: aiohttp.ClientSession, params: dict[str, Any],
                    request: ChatRequest | None = None) -> bytes:
        """One request to ``/chat/completions``; the body of a 2xx answer, or a ProviderError.

        We send the body as it is and read the answer ourselves: the ``openai`` SDK walks every
        request through its TypedDict annotations and builds its answer objects in pure Python,
        several times the CPU of the HTTP exchange itself (``bench/llm_bench.py``). The parts
        ``request`` has encoded already for its key (the conversation, the tools) go in as that text."""
        body = _body(params, request)
        try:
            async with session.post(self._url, data=body, headers=self._headers,
                                    proxy=self._proxy) as response:
                raw = await response.read()
                if response.status < 400:
                    return raw
                status, retry_after = response.status, response.headers.get("retry-after")
        except asyncio.TimeoutError as exc:
            raise RequestTimeout("request timed out") from exc
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError) or "refused" in str(exc).lower()
            raise ConnectionLost(f"connection {'refused' if refused else 'failed'}: {_short(exc)}") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise ConnectionLost(f"connection failed: {type(exc).__name__}: {_short(exc)}") from exc
        raise _status_error(status, raw, retry_after)

    def _completion(self, request: ChatRequest | None, tally: list[int] | None) -> Any:
        """``chat.completions.create`` for instructor's handlers: the answer as the SDK's
        ChatCompletion. The body reuses ``request``'s encoded conversation; every attempt's
        tokens are added to ``tally`` ([prompt, completion, cached prompt])."""
        session = self._session()

        async def create(**params: Any) -> ChatCompletion:
            completion = _read_completion(await self._post(session, params, request))
            if tally is not None:
                if completion.usage is not None:
                    tally[0] += completion.usage.prompt_tokens or 0
                    tally[1] += completion.usage.completion_tokens or 0
                    tally[2] += cached_tokens(completion.usage)
                else:  # a server that reports no usage: about four characters a token
                    tally[0] += len(_body(params, request)) // 4
                    tally[1] += len(_answer_text(completion)) // 4
            return completion
        return create

    async def chat(self, request: ChatRequest) -> ChatReply:
        params = self._params(request)
        raw = await self._post(self._session(), params, request)
        data = _read_json(raw)
        try:
            choice = data["choices"][0]
            message = choice["message"]
            usage = data.get("usage")
            if not isinstance(usage, dict):  # a server that reports none: about four characters a token
                usage = {"prompt_tokens": len(_body(params, request)) // 4,
                         "completion_tokens": len(json.dumps(message)) // 4}
            return ChatReply(
                content=message.get("content"),
                tool_calls=[ToolCall(id=c.get("id") or "", name=c["function"]["name"],
                                     arguments=c["function"].get("arguments") or "")
                            for c in (message.get("tool_calls") or [])],
                finish_reason=choice.get("finish_reason"),
                usage=Usage(prompt_tokens=usage.get("prompt_tokens") or 0,
                            completion_tokens=usage.get("completion_tokens") or 0,
                            cached_tokens=cached_tokens(usage)))
        except (KeyError, IndexError, TypeError, AttributeError, ValidationError) as exc:
            raise MalformedResponse(f"the response is not a chat completion: {_short(exc)}") from exc

    async def aclose(self) -> None:
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()
        self._forget_closed_loops()

    def _forget_closed_loops(self) -> None:
        """Sessions of event loops that have ended (``asyncio.run`` per call, as tests and
        scripts do): their sockets are closed now, without the loop they belonged to."""
        for loop in [loop for loop in self._sessions if loop.is_closed()]:
            session = self._sessions.pop(loop)
            connector = session.connector
            session.detach()
            if connector is not None:
                connector._close()  # the synchronous half of close(); there is no loop to await on


def _proxy_for(url: str) -> str | None:
    """The proxy the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) names for ``url``."""
    parts = urlparse(url)
    host = parts.hostname or ""
    if _is_local(url) or urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _body(params: dict[str, Any], request: ChatRequest | None) -> bytes:
    """The JSON body of ``params`` (None values left out), with the text ``request`` already has
    for a value it shares (see ``ChatRequest.encoded``)."""
    parts = []
    for name, value in params.items():
        if value is not None:
            text = request.encoded(name, value) if request is not None else None
            parts.append(f"{json.dumps(name)}: {text if text is not None else jsontext.dumps(value)}")
    return ("{" + ", ".join(parts) + "}").encode()


def _read_json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:  # a truncated or garbled body: a transport fault
        raise MalformedResponse(f"the response body was not valid JSON: {_short(exc)}") from exc
    if not isinstance(data, dict) or not data.get("choices"):
        raise MalformedResponse(f"the response is not a chat completion: {raw[:200]!r}")
    return data


def _read_completion(raw: bytes) -> ChatCompletion:
    """The SDK's ChatCompletion, validated by pydantic-core (microseconds); an answer that does
    not fit its declared types (servers omit ``id`` or invent a finish reason) is read as
    leniently as the SDK itself reads every answer."""
    try:
        return ChatCompletion.model_validate_json(raw)
    except ValidationError:
        return ChatCompletion.model_construct(**_read_json(raw))  # the SDK's lenient reader


def _answer_text(completion: ChatCompletion) -> str:
    """What the model wrote in ``completion`` (its text or tool calls), for a token estimate."""
    try:
        message = completion.choices[0].message
        return (message.content or "") + "".join(c.function.arguments or "" for c in message.tool_calls or [])
    except (AttributeError, IndexError, TypeError):
        return ""


def _status_error(status: int, raw: bytes, retry_after: str | None) -> ProviderError:
    try:
        error = json.loads(raw).get("error")
        text = (error.get("message") if isinstance(error, dict) else error) or raw.decode(errors="replace")
    except (ValueError, AttributeError):
        text = raw.decode(errors="replace")
    text = _first_line(text) or "(no body)"
    if status == 429:
        try:
            wait = float(retry_after) if retry_after else None
        except ValueError:
            wait = None
        return RateLimited(f"429 rate limited: {text}", wait)
    if status >= 500:
        return ServerError(f"{status} from server: {text}")
    return rejected(f"{status}: {text}", status)


def cached_tokens(usage: Any) -> int:
    """The prompt tokens a provider read from its prompt cache, where it says: OpenAI and most
    OpenAI-compatible servers in ``prompt_tokens_details.cached_tokens``, DeepSeek's API in
    ``prompt_cache_hit_tokens``. ``usage`` is the answer's usage as JSON, or the SDK's object."""
    details = _field(usage, "prompt_tokens_details")
    cached = _field(details, "cached_tokens") if details is not None else None
    if not isinstance(cached, int):
        cached = _field(usage, "prompt_cache_hit_tokens")
    return cached if isinstance(cached, int) and cached > 0 else 0


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, the field or extra field ``name`` of an SDK object (not through
    ``getattr``: pydantic's lookup of a name the object lacks raises and catches an error,
    ~4 µs in a loop and about ten times that in a run, on every structured call)."""
    if isinstance(value, dict):
        return value.get(name)
    fields = getattr(value, "__dict__", None) or {}
    if name in fields:
        return fields[name]
    return (getattr(value, "__pydantic_extra__", None) or {}).get(name)
