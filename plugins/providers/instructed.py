"""Structured output through ``instructor``, shared by the providers that speak the OpenAI chat
format (``openai`` over HTTP, ``litellm`` for any API LiteLLM translates): instructor's handlers
shape the request and parse and validate the answer, re-asking with the error; the structured
mode is probed once per endpoint when ``auto``. A provider using it gives ``_completion``: what
``chat.completions.create`` would be for it."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, TypeVar

import instructor
from instructor.v2.core import response_model as instructor_models
from instructor.v2.core.errors import (AsyncValidationError, IncompleteOutputException,
                                       ResponseParsingError)
from instructor.v2.core.function_calls import ResponseSchema
from instructor.v2.core.providers import Provider
from instructor.v2.core.registry import mode_registry
from instructor.v2.validation import async_validators as instructor_validators
from pydantic import BaseModel, ValidationError

from intellagent.llm.errors import (REFUSALS, OutputInvalid, ProviderError, RepeatedRefusal,
                                    RequestRejected, ServerError, validation_summary)
from intellagent.llm.sizing import output_cap
from intellagent.llm.types import ChatRequest, ResponseModel, Usage
from intellagent_plugins.providers import instructor_memo

M = TypeVar("M", bound=BaseModel)
ResponseModel.add_mixin(ResponseSchema)  # per-call models instructor takes without a wrapper class
PROBE_TRIES = 4  # attempts of one mode through transient faults
DEFAULT_TIMEOUT = 120.0  # seconds per request when built without the LLM layer's limit
MODES = {"tools": instructor.Mode.TOOLS, "json_schema": instructor.Mode.JSON_SCHEMA,
         "json": instructor.Mode.JSON}
PARSE_ERRORS = (ValidationError, json.JSONDecodeError, AsyncValidationError, ResponseParsingError)
"""What instructor re-asks on: an answer that is not the response model's JSON."""


class Probe(BaseModel):
    """A structured answer any endpoint that supports a mode can give."""

    ok: bool

logging.getLogger("instructor").setLevel(logging.CRITICAL)  # we report failures ourselves
instructor_memo.apply()

#: ``create(**params)``: one chat completion (an object of the openai SDK's shape)
Create = Callable[..., Any]


class Instructed:
    """Structured output for a provider with ``model``, ``base_url``, ``mode`` (a mode's name, or
    None to probe), ``_cap_output`` and ``_completion(request, tally)``."""

    model: str
    base_url: str | None
    mode: str | None
    _cap_output: bool
    _probe_lock: asyncio.Lock | None = None

    def _completion(self, request: ChatRequest | None, tally: list[int] | None) -> Create:
        """``chat.completions.create`` for instructor's handlers; every attempt's tokens are
        added to ``tally`` ([prompt, completion, cached prompt])."""
        raise NotImplementedError

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
                    await instructed(self._completion(None, None), mode, Probe, 0, {
                        "model": self.model,
                        "messages": [{"role": "user", "content": "Answer with ok set to true."}]})
                    logging.getLogger("intellagent").info("structured output at %s: %s", self.base_url, mode)
                    return mode
                except Exception as exc:
                    error = translate(exc)
                if isinstance(error, RequestRejected) and error.status in REFUSALS:
                    raise error  # no mode can work with a refused key or an unknown model
                error = refusal.permanent(error) or error  # a 500 for this mode every time rules it out
                if not error.transient:
                    break
                if attempt == PROBE_TRIES - 1:
                    raise error
                await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt, getattr(error, "retry_after", None) or 2.0))
            failures.append(f"{mode}: {short(error)}")
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

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        params = self._params(request)
        params.pop("tool_choice", None)
        if "max_tokens" not in params and self._cap_output:
            params["max_tokens"] = output_cap(request.response_schema)
        try:
            mode = await self.structured_mode()  # a probe's tokens are not this call's
        except Exception as exc:
            raise translate(exc) from exc
        tally = [0, 0, 0]  # tokens of every attempt (invalid output is re-asked)
        try:
            value = await instructed(self._completion(request, tally), mode, response_model,
                                     validation_retries, params)
        except Exception as exc:
            error = translate(exc)
            error.usage = Usage(prompt_tokens=tally[0], completion_tokens=tally[1],
                                cached_tokens=tally[2])  # paid all the same
            raise error from exc
        if type(value) is not response_model:  # instructor returns a subclass of its own
            value = response_model.model_validate(value.model_dump(by_alias=True))
        return value, Usage(prompt_tokens=tally[0], completion_tokens=tally[1], cached_tokens=tally[2])


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


def short(exc: BaseException) -> str:
    return first_line(str(exc)) or type(exc).__name__


async def instructed(create: Any, mode: str, response_model: type[M], retries: int,
                     params: dict[str, Any]) -> M:
    """``response_model`` from ``create(**request)``, the way instructor's patched ``create``
    makes it: its mode's handlers shape the request, parse and validate the answer (strictly,
    as instructor does by default), and on an invalid answer add the re-ask to the conversation,
    up to ``retries`` times. Only the attempt loop around them is ours: instructor's generic one
    (tenacity, hooks, templating, its own cache and usage tally) cost a quarter of a structured
    call's client CPU (0.8 against 0.6 ms, ``bench/llm_bench.py``), for nothing the LLM layer
    does not do itself (it retries transport faults, counts tokens, caches). A transport fault
    is raised as it is; output that still does not fit after the re-asks is ``OutputInvalid``."""
    handlers = mode_registry.get_handlers(Provider.OPENAI, MODES[mode])  # kept by instructor's registry
    instructor_validators.reject_async_validators(response_model)  # memoized by instructor_memo
    model, kwargs = handlers.request_handler(
        response_model=instructor_models.prepare_response_model(response_model), kwargs=params)
    attempt = 1
    while True:
        completion = await create(**kwargs)
        try:
            return handlers.response_parser(response=completion, response_model=model, validation_context=None,
                                            strict=True, stream=False, is_async=True)
        except IncompleteOutputException as exc:  # asking again would be cut at the same cap
            cap = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
            raise OutputInvalid(f"the answer for {response_model.__name__} was cut at the output "
                                f"cap{f' of {cap} tokens (max_tokens)' if cap else ''} before it "
                                "was complete") from exc
        except PARSE_ERRORS as exc:
            if attempt > retries:
                raise OutputInvalid(f"output did not fit {response_model.__name__} after {attempt} "
                                    f"attempt{'s' if attempt > 1 else ''}: {validation_summary(exc)}") from exc
            kwargs = handlers.reask_handler(kwargs=kwargs, response=completion, exception=exc)
            attempt += 1


def translate(exc: BaseException) -> ProviderError:
    """Our transport raises ProviderErrors; anything else reached us from instructor."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, ValidationError):
        return OutputInvalid(validation_summary(exc))
    return ServerError(f"{type(exc).__name__}: {short(exc)}")
