"""What goes to a model and what comes back, independent of the provider."""

from __future__ import annotations

import functools
import json
import weakref
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, create_model
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema

from intellagent.hashing import json_copy, text_hash
from intellagent.jsontext import dumps, sorted_dumps

T = TypeVar("T")


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those the provider read from its prompt cache

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens,
                     cached_tokens=self.cached_tokens + other.cached_tokens)


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str = Field(description="JSON text, as the model wrote it.")


class ChatReply(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


class ChatRequest(BaseModel):
    """One request. Its ``key`` addresses the cache: everything that shapes the answer."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema of the structured response, when there is one.")
    endpoint: dict[str, Any] | None = Field(
        default=None, description="The rest of the model's settings that shape its answers "
                                  "(provider, base URL, provider options).")
    sample: str | None = Field(
        default=None, description="Which draw this is when one question is asked more than once "
                                  "(the step item it is asked for, a trial, a candidate): part of "
                                  "the key and of the seed, never sent to the model.")
    _texts: dict[str, str] = PrivateAttr(default_factory=dict)

    def canonical(self) -> str:
        """The request as compact sorted-key JSON text (the fields are plain JSON already: read
        as they are, not through ``model_dump``, which copies a long conversation value by value).

        Made field by field through orjson (``jsontext.sorted_dumps``), the same text as one
        ``sorted_dumps`` of them all; the conversation's text is kept for the request's body
        (``encoded``), so the longest part of a request is encoded once, not once for the key
        and again to send. The tools are kept as declared (``jsontext.dumps``): the model reads
        each tool's parameters in the order the environment gives them, not sorted."""
        parts = []
        texts = self.__pydantic_private__["_texts"]  # not through pydantic's __getattr__ (~3 µs)
        for name in _FIELDS:
            value = getattr(self, name)
            text = sorted_dumps(value)
            if name in _SPLICED and value:
                texts[name] = text if name == "messages" else dumps(value)
            parts.append(f'"{name}":{text}')
        return "{" + ",".join(parts) + "}"

    def encoded(self, name: str, value: Any) -> str | None:
        """The body's JSON text of field ``name`` kept by ``canonical``, when ``value`` equals
        that field's value (a structured-output library rebuilds the messages it is given, equal
        ones; comparing them is a fraction of encoding them). Other messages (a re-ask: the
        conversation, the invalid answer and its errors) are encoded the same way, keys sorted,
        so the conversation they resend is the same bytes, a prefix a provider's prompt cache
        finds. Else None: the caller encodes ``value`` as it is."""
        if name not in _SPLICED:  # before the private attribute: pydantic's lookup of one is ~3 µs
            return None
        text = self.__pydantic_private__["_texts"].get(name)
        if text is not None and value == getattr(self, name):
            return text
        return sorted_dumps(value) if name == "messages" else None

    def key(self, canonical: str | None = None) -> str:
        return text_hash(self.canonical() if canonical is None else canonical)

    def legacy_key(self) -> str:
        """The key this request had in stores made before migration 8: the hash of one
        ``json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)`` (standard
        separators; four times the CPU of ``canonical``). A store that holds answers cached
        under such keys is still read through them (``LLM``)."""
        return text_hash("{" + ", ".join(f'"{name}": {_legacy_dumps(getattr(self, name))}'
                                         for name in _FIELDS) + "}")


_FIELDS = tuple(sorted(ChatRequest.model_fields))
_SPLICED = {"messages", "tools"}
"""The fields whose text ``canonical`` keeps for a provider's request body (``encoded``)."""


_legacy_dumps = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


_SCHEMAS: "weakref.WeakKeyDictionary[type, dict[str, Any]]" = weakref.WeakKeyDictionary()


class ResponseModel(BaseModel):
    """Base of the response models a step builds for one call (one field per policy id, say).

    pydantic builds a model's JSON Schema anew whenever it is asked, and one structured call asks
    three times (the cache key, instructor's tool definition, instructor's own subclass of the
    model): milliseconds per call for a model with nested definitions. A ``ResponseModel``'s
    schema is built once per class, and a subclass that adds no fields (instructor's wrapper)
    shares its parent's. Each caller gets its own copy (instructor edits what it gets)."""

    @classmethod
    def model_json_schema(cls, by_alias: bool | None = None, ref_template: str = DEFAULT_REF_TEMPLATE,
                          schema_generator: type[GenerateJsonSchema] = GenerateJsonSchema,
                          mode: Any = "validation", **kwargs: Any) -> dict[str, Any]:
        if (by_alias, ref_template, schema_generator, mode, kwargs) != \
                (None, DEFAULT_REF_TEMPLATE, GenerateJsonSchema, "validation", {}):
            return super().model_json_schema(by_alias, ref_template, schema_generator, mode, **kwargs)
        owner = cls
        while owner not in _SCHEMAS and _same_schema_as_parent(owner):
            owner = owner.__bases__[0]
        schema = _SCHEMAS.get(owner)
        if schema is None:
            schema = _SCHEMAS[owner] = super(ResponseModel, owner).model_json_schema()
        return json_copy(schema)

    mixins: ClassVar[tuple[type, ...]] = ()
    """Bases that providers add to every model ``derive`` makes (see ``add_mixin``)."""

    @classmethod
    def add_mixin(cls, mixin: type) -> None:
        """Make every model ``derive`` makes also a ``mixin``: a provider's structured-output
        library then takes the class as it is (instructor wraps any other class in a subclass of
        its own, and a class made per call costs a wrapper class per call)."""
        if mixin not in ResponseModel.mixins:
            ResponseModel.mixins = ResponseModel.mixins + (mixin,)

    @classmethod
    def derive(cls, name: str, **fields: Any) -> type["ResponseModel"]:
        """A response model subclassing this one (and the providers' mixins) with ``fields``."""
        return create_model(name, __base__=(cls, *ResponseModel.mixins), **fields)

    @classmethod
    def adopt_schema(cls, schema: dict[str, Any]) -> None:
        """Take ``schema`` as this class's JSON Schema instead of pydantic's walk of it: for a
        step that builds one class per call from a template whose schema it already has. It
        must be the schema pydantic makes of the model the class stands for, and the class must
        accept what that model accepts (the step's tests compare the two)."""
        _SCHEMAS[cls] = schema


RECENT_MODELS = 32
"""Response models a per-class cache keeps (this module's, and the providers' memos of
instructor's helpers), least recently used dropped first: a step that makes a model per call (one
per event) asks for it again only within that call (a re-ask). In a 200-event run the caches
missed as often with 32 as with 256 (about 415 of 3,900 look-ups, each a new class); a run of
1,600 events over HTTP peaked at 242 MiB instead of 256 (1.03× the 100-event run's peak instead
of 1.09×, ``bench/http_memory.py``)."""


@functools.lru_cache(maxsize=RECENT_MODELS)
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A response model's JSON Schema, made once per class (pydantic rebuilds it every call, a
    walk of the model that costs milliseconds and leaves cyclic garbage), for the recent classes
    (:data:`RECENT_MODELS`). Shared: read, do not change it."""
    return model.model_json_schema()


def _same_schema_as_parent(cls: type) -> bool:
    """``cls`` only wraps its first base (same name, docstring and fields), as instructor's
    ``response_schema`` does (its ``functools.wraps`` copies the base's annotations)."""
    base = cls.__bases__[0]
    if base is ResponseModel or not issubclass(base, ResponseModel):
        return False
    own = cls.__dict__.get("__annotations__")
    return (not own or own is base.__dict__.get("__annotations__")) and cls.__name__ == base.__name__ \
        and cls.__doc__ == base.__doc__ and cls.model_fields.keys() == base.model_fields.keys()


class Status(str, Enum):
    """How a call ended; an item whose call failed takes its value as the item's status."""

    ok = "ok"
    infra_error = "infra-error"
    invalid_output = "invalid-output"  # the model's answer did not fit, even after re-asks
    budget_exhausted = "budget-exhausted"


class Outcome(BaseModel, Generic[T]):
    """The result of a call: a value, or an explicit reason there is none. Never raised."""

    status: Status
    value: T | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    cached: bool = False
    attempts: int = 0
    request_hash: str = ""

    @property
    def ok(self) -> bool:
        return self.status is Status.ok
