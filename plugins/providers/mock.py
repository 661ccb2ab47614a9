"""Mock models that make every stage run offline and deterministically.

- ``mock/schema``: fabricates a valid instance of any response model from the run seed and the
  request; chat replies are deterministic text, or a tool call with valid arguments. Options:
  ``tool_call_rate`` (0.5), ``list_items`` (a preferred length for lists, within their bounds).
- ``mock/scripted``: replies from a queue and records every request (``enqueue``, ``history``).
- ``mock/function``: replies from a Python callable ``fn(request, response_model)``.
- ``mock/demo``: scripted, realistic answers for every role on the quickstart's environment
  (``intellagent_plugins.providers.demo``); its reports say they are a demo.
"""

from __future__ import annotations

import json
import random
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from pydantic import BaseModel, Field, ValidationError

from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError
from intellagent.llm.errors import OutputInvalid, ProviderError, validation_summary
from intellagent.llm.fabricate import WORDS, fabricate
from intellagent.llm.types import ChatReply, ChatRequest, ToolCall, Usage, schema_of
from intellagent.model import StrictModel
from intellagent.pipeline import ModelSettings

M = TypeVar("M", bound=BaseModel)


def estimate_usage(request: ChatRequest, output: str) -> Usage:
    """Token counts the way a model would roughly report them (4 characters a token)."""
    prompt = len(json.dumps(request.messages)) + len(json.dumps(request.tools or []))
    return Usage(prompt_tokens=max(1, prompt // 4), completion_tokens=max(1, len(output) // 4))


class SchemaModel:
    """Deterministic: the same seed and request always give the same reply."""

    cacheable = True

    def __init__(self, seed: int = 0, tool_call_rate: float = 0.5, list_items: int | None = None) -> None:
        self.seed = seed
        self.tool_call_rate = tool_call_rate
        self.list_items = list_items
        self.requests = 0

    def _rng(self, request: ChatRequest) -> random.Random:
        return random.Random(f"{self.seed}:{request.key()}")

    async def chat(self, request: ChatRequest) -> ChatReply:
        self.requests += 1
        rng = self._rng(request)
        last_role = request.messages[-1].get("role") if request.messages else None
        if request.tools and last_role != "tool" and rng.random() < self.tool_call_rate:
            tool = rng.choice(request.tools)["function"]
            args = fabricate(tool.get("parameters", {"type": "object"}), rng)
            call = ToolCall(id=f"call_{rng.getrandbits(32):08x}", name=tool["name"],
                            arguments=json.dumps(args))
            return ChatReply(tool_calls=[call], finish_reason="tool_calls",
                             usage=estimate_usage(request, call.arguments))
        text = "Mock reply: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) + "."
        return ChatReply(content=text, finish_reason="stop", usage=estimate_usage(request, text))

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        self.requests += 1
        rng = self._rng(request)
        schema = schema_of(response_model)
        error: Exception | None = None
        for _ in range(validation_retries + 1):
            data = fabricate(schema, rng, list_items=self.list_items)
            try:
                value = response_model.model_validate(data)
            except ValidationError as exc:  # a custom validator the schema cannot express
                error = exc
                continue
            return value, estimate_usage(request, json.dumps(data))
        failed = OutputInvalid(f"mock/schema could not fabricate a valid {response_model.__name__}: "
                               f"{validation_summary(error)}")
        failed.usage = estimate_usage(request, "")
        raise failed


def _as_reply(item: Any, request: ChatRequest, n: int) -> ChatReply:
    if isinstance(item, ChatReply):
        return item
    if isinstance(item, str):
        return ChatReply(content=item, finish_reason="stop", usage=estimate_usage(request, item))
    if isinstance(item, dict):
        calls = [ToolCall(id=c.get("id", f"call_{n}_{i}"), name=c["name"],
                          arguments=c["arguments"] if isinstance(c.get("arguments"), str)
                          else json.dumps(c.get("arguments", {})))
                 for i, c in enumerate(item.get("tool_calls", []))]
        content = item.get("content")
        return ChatReply(content=content, tool_calls=calls,
                         finish_reason="tool_calls" if calls else "stop",
                         usage=estimate_usage(request, (content or "") + json.dumps(item)))
    raise TypeError(f"cannot turn {type(item).__name__} into a chat reply")


def _as_model(item: Any, response_model: type[M]) -> M:
    if isinstance(item, response_model):
        return item
    if isinstance(item, BaseModel):
        item = item.model_dump(by_alias=True)
    if isinstance(item, str):
        return response_model.model_validate_json(item)
    return response_model.model_validate(item)


class ScriptedModel:
    """Replies from a queue. An exception in the queue is raised instead of replying; a structured
    reply that does not validate consumes the next item, as a re-ask would."""

    cacheable = False

    def __init__(self, replies: Iterable[Any] = ()) -> None:
        self.queue: deque[Any] = deque(replies)
        self.history: list[ChatRequest] = []
        self.validation_errors: list[str] = []

    def enqueue(self, *replies: Any) -> "ScriptedModel":
        self.queue.extend(replies)
        return self

    def _next(self, request: ChatRequest) -> Any:
        self.history.append(request)
        if not self.queue:
            raise ProviderError("mock/scripted has no reply left in its queue")
        item = self.queue.popleft()
        if isinstance(item, BaseException):
            raise item
        return item

    async def chat(self, request: ChatRequest) -> ChatReply:
        return _as_reply(self._next(request), request, len(self.history))

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        spent = Usage()  # every answer's tokens, the ones that did not fit too
        for attempt in range(validation_retries + 1):
            item = self._next(request)
            try:
                value = _as_model(item, response_model)
            except ValidationError as exc:
                self.validation_errors.append(str(exc))
                spent += estimate_usage(request, str(item))
                request = request.model_copy(update={"messages": request.messages + [
                    {"role": "user", "content": f"Fix these errors: {exc}"}]})
                last = exc
                continue
            return value, spent + estimate_usage(request, value.model_dump_json())
        failed = OutputInvalid(f"output did not fit {response_model.__name__} after "
                               f"{validation_retries + 1} attempts: {validation_summary(last)}")
        failed.usage = spent
        raise failed


class FunctionModel:
    """Replies computed by ``fn(request, response_model)`` (``response_model`` is None for chat)."""

    cacheable = False

    def __init__(self, fn: Callable[[ChatRequest, type[BaseModel] | None], Any]) -> None:
        self.fn = fn
        self.history: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatReply:
        self.history.append(request)
        return _as_reply(self.fn(request, None), request, len(self.history))

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        self.history.append(request)
        answer = self.fn(request, response_model)
        try:
            value = _as_model(answer, response_model)
        except ValidationError as exc:
            failed = OutputInvalid(f"mock/function output did not fit {response_model.__name__}: "
                                   f"{validation_summary(exc)}")
            failed.usage = estimate_usage(request, str(answer))
            raise failed from None
        return value, estimate_usage(request, value.model_dump_json())


class SchemaOptions(StrictModel):
    list_items: int | None = Field(default=None, ge=0, le=1000, description="Length of every "
                                   "fabricated list the schema allows.")
    tool_call_rate: float = Field(default=0.5, ge=0, le=1)


class DemoOptions(StrictModel):
    """``mock/demo`` takes no option: its answers are scripted for the quickstart's environment."""


class ScriptedOptions(StrictModel):
    replies: list[Any] = Field(default_factory=list)


class FunctionOptions(StrictModel):
    function: str = Field(description="'module:callable' or 'file.py:callable'.")


MOCK_OPTIONS: dict[str, type[StrictModel]] = {"schema": SchemaOptions, "scripted": ScriptedOptions,
                                              "function": FunctionOptions, "demo": DemoOptions}


def _options(settings: ModelSettings) -> StrictModel:
    """The mock's options, checked; raises ConfigError naming what is wrong."""
    kind = settings.model.removeprefix("mock/")
    model = MOCK_OPTIONS.get(kind)
    if model is None:
        raise ConfigError(f"unknown mock model '{settings.model}' (mock/schema, mock/scripted, "
                          "mock/function, mock/demo)")
    try:
        return model.model_validate(dict(settings.options))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        what = f"unknown option '{key}'" if err["type"] == "extra_forbidden" else \
            f"needs options: {{{key}: ...}}" if err["type"] == "missing" else f"options.{key}: {err['msg']}"
        raise ConfigError(f"{settings.model} {what} (options: {', '.join(model.model_fields) or 'none'})") from None


def _function(settings: ModelSettings, options: FunctionOptions) -> Callable[..., Any]:
    try:
        fn = resolve(options.function, Path.cwd())
    except ReferenceError_ as exc:
        raise ConfigError(str(exc), item=f"model {settings.model}") from None
    if not callable(fn):
        raise ConfigError(f"'{options.function}' is not callable", item=f"model {settings.model}")
    return fn


def check_mock(settings: ModelSettings) -> str | None:
    """What is wrong with a mock model's settings (an unknown mock, bad options, a function that
    does not resolve), before any call: ``validate`` and ``run`` refuse it up front."""
    try:
        options = _options(settings)
        if isinstance(options, FunctionOptions):
            _function(settings, options)
    except ConfigError as exc:
        return str(exc)
    return None


def mock_provider(settings: ModelSettings, *, seed: int = 0) -> Any:
    """Build the mock named by ``settings.model`` (``mock/schema|scripted|function``)."""
    options = _options(settings)
    if isinstance(options, SchemaOptions):
        return SchemaModel(seed=seed, tool_call_rate=options.tool_call_rate, list_items=options.list_items)
    if isinstance(options, ScriptedOptions):
        return ScriptedModel(options.replies)
    if isinstance(options, DemoOptions):
        from intellagent_plugins.providers.demo.model import DemoModel

        return DemoModel(seed=seed)
    assert isinstance(options, FunctionOptions)
    return FunctionModel(_function(settings, options))


def mock_notice(settings: ModelSettings, played: list[str], others: list[str]) -> str | None:
    """The demo's notice, which every report of a run on it shows; where other roles had other
    models, which answers were the demo's."""
    if settings.model == "mock/demo":
        from intellagent_plugins.providers.demo.model import NOTICE, partial_notice

        return partial_notice(played, others) if others else NOTICE
    return None


mock_provider.check = check_mock  # type: ignore[attr-defined]
mock_provider.notice = mock_notice  # type: ignore[attr-defined]
