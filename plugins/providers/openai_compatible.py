"""Any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM
proxy) through the async ``openai`` client, with ``instructor`` for structured outputs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import traceback
from typing import Any, TypeVar
from urllib.parse import urlparse

import instructor
import openai
from instructor.core import InstructorRetryException
from pydantic import BaseModel, ValidationError

from intellagent.llm.errors import (ConnectionLost, MalformedResponse, OutputInvalid,
                                    ProviderError, RateLimited, RealModelForbidden,
                                    RepeatedRefusal, RequestRejected, RequestTimeout, ServerError)
from intellagent.llm.types import ChatReply, ChatRequest, ToolCall, Usage
from intellagent.pipeline import ModelSettings
from intellagent_plugins.providers import instructor_memo

M = TypeVar("M", bound=BaseModel)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
PROBE_TRIES = 4  # attempts of one mode through transient faults
MODES = {"tools": instructor.Mode.TOOLS, "json_schema": instructor.Mode.JSON_SCHEMA,
         "json": instructor.Mode.JSON}


class Probe(BaseModel):
    """A structured answer any endpoint that supports a mode can give."""

    ok: bool

logging.getLogger("instructor").setLevel(logging.CRITICAL)  # we report failures ourselves


def _is_local(base_url: str | None) -> bool:
    if not base_url:
        return False
    host = urlparse(base_url).hostname or ""
    return host in LOOPBACK or host.startswith("127.")


class OpenAIProvider:
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
        self._client_args = dict(base_url=base_url, api_key=api_key, max_retries=0,
                                 timeout=settings.timeout or 120.0)
        self._clients: dict[int, tuple[openai.AsyncOpenAI, dict[str, Any]]] = {}
        # auto: the OpenAI API itself is known to take a forced tool call; any other endpoint
        # is probed once (per process) and the first mode that works is kept
        self.mode: str | None = settings.structured if settings.structured != "auto" else (
            "tools" if base_url is None else None)
        self._probe_lock: asyncio.Lock | None = None

    def _for_this_loop(self, mode: str = "tools") -> tuple[openai.AsyncOpenAI, Any]:
        """HTTP connections belong to one event loop: one client per loop that uses us."""
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            # aiohttp moves requests with about a third less CPU than the default httpx transport
            http = openai.DefaultAioHttpClient() if hasattr(openai, "DefaultAioHttpClient") else None
            client = openai.AsyncOpenAI(**self._client_args, **({"http_client": http} if http else {}))
            self._clients[loop] = (client, {})
        client, by_mode = self._clients[loop]
        if mode not in by_mode:
            # instructor over our lean create (below), exactly as from_openai wraps the SDK's
            by_mode[mode] = instructor.AsyncInstructor(
                client=client, create=instructor.patch(create=_lean_create(client), mode=MODES[mode]),
                mode=MODES[mode])
            instructor_memo.apply()  # after patch, which imports the modules to patch
        return client, by_mode[mode]

    async def structured_mode(self) -> str:
        """The structured-output mode of this endpoint (probed once when ``auto``)."""
        if self.mode is not None:
            return self.mode
        if self._probe_lock is None:
            self._probe_lock = asyncio.Lock()
        async with self._probe_lock:
            if self.mode is None:
                self.mode = await self._probe()
        return self.mode

    async def _probe(self) -> str:
        """The first mode this endpoint answers in. A transient fault says nothing about a mode:
        it is retried a few times, and if it persists it is raised (the call is retried later and
        nothing is remembered); only a permanent failure moves on to the next mode."""
        failures = []
        for mode in ("tools", "json_schema", "json"):
            refusal = RepeatedRefusal()
            for attempt in range(PROBE_TRIES):
                try:
                    _, client = self._for_this_loop(mode)
                    await client.chat.completions.create(
                        model=self.model, response_model=Probe, max_retries=0,
                        messages=[{"role": "user", "content": "Answer with ok set to true."}])
                    logging.getLogger("intellagent").info("structured output at %s: %s", self.base_url, mode)
                    return mode
                except Exception as exc:
                    error = _classify(exc, "Probe") if isinstance(exc, InstructorRetryException) else _translate(exc)
                error = refusal.permanent(error) or error  # a 500 for this mode every time rules it out
                if not error.transient:
                    break
                if attempt == PROBE_TRIES - 1:
                    raise error
                await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt, getattr(error, "retry_after", None) or 2.0))
            failures.append(f"{mode}: {_short(error)}")
        raise RequestRejected(f"no structured-output mode works at {self.base_url} for "
                              f"{self.model} ({'; '.join(failures)}); set `structured:` in the "
                              "model's settings")

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": request.messages}
        for name in ("temperature", "max_tokens", "seed", "tool_choice"):
            value = getattr(request, name)
            if value is not None:
                params[name] = value
        if request.tools:
            params["tools"] = request.tools
        return params

    async def chat(self, request: ChatRequest) -> ChatReply:
        try:
            client, _ = self._for_this_loop()
            response = await _lean_create(client)(**self._params(request))
        except Exception as exc:
            raise _translate(exc) from exc
        choice = response.choices[0]
        usage = response.usage
        return ChatReply(
            content=choice.message.content,
            tool_calls=[ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                        for c in (choice.message.tool_calls or [])],
            finish_reason=choice.finish_reason,
            usage=Usage(prompt_tokens=usage.prompt_tokens if usage else 0,
                        completion_tokens=usage.completion_tokens if usage else 0))

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        params = self._params(request)
        params.pop("tool_choice", None)
        try:
            _, structured_client = self._for_this_loop(await self.structured_mode())
            value, completion = await structured_client.chat.completions.create_with_completion(
                response_model=response_model, max_retries=validation_retries, **params)
        except InstructorRetryException as exc:
            raise _classify(exc, response_model.__name__) from exc
        except Exception as exc:
            raise _translate(exc) from exc
        total = getattr(value, "_total_usage", None) or getattr(completion, "usage", None)
        if type(value) is not response_model:  # instructor returns a subclass of its own
            value = response_model.model_validate(value.model_dump(by_alias=True))
        usage = Usage(prompt_tokens=getattr(total, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(total, "completion_tokens", 0) or 0)
        return value, usage

    async def aclose(self) -> None:
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client[0].close()


def _lean_create(client: openai.AsyncOpenAI) -> Any:
    """``chat.completions.create`` without the SDK's request transform.

    The SDK walks every request body through its TypedDict annotations before sending it (to
    rename aliased keys and format dates; a chat request has neither), which costs several ms of
    CPU per call on a long conversation with tools: more than everything else the client does.
    We send the body as it is through the SDK's documented ``post`` (same auth, headers, timeout,
    error classes and response parsing)."""
    from openai.types.chat import ChatCompletion

    async def create(**params: Any) -> ChatCompletion:
        body = {k: v for k, v in params.items() if v is not None and not isinstance(v, (openai.NotGiven, openai.Omit))}
        return await client.post("/chat/completions", body=body, cast_to=ChatCompletion)
    return create


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _classify(exc: InstructorRetryException, model_name: str) -> ProviderError:
    """What ended instructor's attempts, by the exception itself (not its message): a transport
    or server fault is transient (retried with back-off by the LLM layer, whatever answers came
    before it); only output that kept failing validation is invalid-output."""
    attempts = list(getattr(exc, "failed_attempts", None) or [])
    # the error that ended the attempts: instructor chains it as the cause (its list of failed
    # attempts holds only the validation failures)
    last = exc.__cause__ or (attempts[-1].exception if attempts else exc)
    for cause in _chain(last):
        if isinstance(cause, (ProviderError, openai.APIError)) and not isinstance(
                cause, openai.APIResponseValidationError):
            return _translate(cause)
        if isinstance(cause, json.JSONDecodeError) and _raised_reading_http(cause):
            return MalformedResponse(f"the response body was not valid JSON: {_short(cause)}")
    n = getattr(exc, "n_attempts", None) or len(attempts) or 1
    return OutputInvalid(f"output did not fit {model_name} after {n} attempt{'s' if n > 1 else ''}: "
                         f"{_short(last)}")


def _raised_reading_http(exc: BaseException) -> bool:
    """A JSON error raised while reading the HTTP response (a truncated or garbled body: a
    transport fault), not while reading the model's output."""
    frames = traceback.extract_tb(exc.__traceback__)
    return any(("httpx" in f.filename and "_models" in f.filename) or "openai/_response" in f.filename
               or "openai/_legacy_response" in f.filename for f in frames)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _translate(exc: BaseException) -> ProviderError:
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.RateLimitError):
        retry_after = None
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        return RateLimited(f"429 rate limited: {_short(exc)}", retry_after)
    if isinstance(exc, openai.APITimeoutError):
        # the aiohttp transport reports a refused connection or a dropped one as a timeout
        causes = _chain(exc)[1:]
        refused = next((c for c in causes if isinstance(c, ConnectionRefusedError)), None)
        if refused is not None:
            return ConnectionLost(f"connection refused: {_short(refused)}")
        for cause in causes:
            if isinstance(cause, OSError) and not isinstance(cause, TimeoutError) or \
                    "disconnected" in str(cause).lower():
                return ConnectionLost(f"connection failed: {_short(cause)}")
        return RequestTimeout("request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return ConnectionLost(f"connection failed: {_short(exc.__cause__ or exc)}")
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return ServerError(f"{exc.status_code} from server: {_short(exc)}")
        return RequestRejected(f"{exc.status_code}: {_short(exc)}")
    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError)):
        return MalformedResponse(f"response was not valid JSON: {_short(exc)}")
    if isinstance(exc, ValidationError):
        return OutputInvalid(_short(exc))
    return ServerError(f"{type(exc).__name__}: {_short(exc)}")
