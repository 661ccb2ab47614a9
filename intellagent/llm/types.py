"""What goes to a model and what comes back, independent of the provider."""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens)


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

    def key(self) -> str:
        text = json.dumps(self.model_dump(), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Status(str, Enum):
    ok = "ok"
    infra_error = "infra-error"
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
