"""What happens inside a step item, as observers see it: each model call, each agent turn, each
tool call, with when it started and how long it took. The LLM layer and the live session report
them; the runner hands them to progress and to the observer hooks (``after_model_call``,
``after_agent_turn``, ``after_tool_call``), e.g. for traces."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(slots=True)
class ModelCall:
    """One model call (cached or made), as it ended."""

    stage: str | None
    role: str
    model: str
    kind: str  # "chat" | "structured"
    item: str | None  # the step item's key
    cached: bool
    attempts: int
    outcome: str  # "ok", "infra-error", "invalid-output", "budget-exhausted"
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    started: float  # wall clock (time.time())
    seconds: float  # from the request to its answer, retries included (0 for a cache hit)
    error: str | None = None
    provider: str | None = None


@dataclass(slots=True)
class AgentTurnDone:
    """One turn of the agent under test."""

    started: float
    seconds: float
    tool_calls: int
    error: str | None = None


@dataclass(slots=True)
class ToolCallDone:
    """One call of an environment's tool on a conversation's database."""

    name: str
    started: float
    seconds: float
    error: bool
    call_id: str = ""


#: How a step item reports what happens inside it: ``observe(event)``.
Observe = Callable[[Any], None]


class Clock:
    """Times one thing: ``started`` now, ``seconds`` when read."""

    __slots__ = ("started", "_t0")

    def __init__(self) -> None:
        self.started = time.time()
        self._t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._t0
