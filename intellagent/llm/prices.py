"""Prices of models, for the cost of every call and the budget's reservations.

A model's price is, in order: the run's own (``llm.prices``: by exact name, then the longest
listed prefix), the maintained price table of the ``genai-prices`` package (bundled data, no
network; a ``provider/`` prefix is stripped, dated snapshots match their family), nothing for a
``mock/`` model. A model none of them knows has no price: its cost is unknown, not zero, and a
dollar budget refuses to run on it (a token budget still works). Cached prompt tokens are priced
at the cached rate where the price has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from intellagent.llm.types import Usage
from intellagent.pipeline import Price

MOCK = "mock/"


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per million tokens: prompt, cached prompt, completion; where it comes from."""

    input: float
    output: float
    cached_input: float | None = None
    source: str = ""  # llm.prices, genai-prices, mock

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        fresh = usage.prompt_tokens - cached
        rate = self.input if self.cached_input is None else self.cached_input
        return (fresh * self.input + cached * rate + usage.completion_tokens * self.output) / 1e6

    def worst(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The most a request of that size can cost (no prompt token cached)."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def _mtok(value: Any) -> float | None:
    """A price per million tokens; a tiered one at its highest tier (the budget's worst case)."""
    if value is None:
        return None
    tiers = getattr(value, "tiers", None)
    if tiers is not None:
        return float(max([value.base, *(t.price for t in tiers)]))
    return float(value)


@lru_cache(maxsize=512)
def table_price(model: str) -> ModelPrice | None:
    """The genai-prices table's price of ``model`` (None when it does not know it)."""
    from genai_prices.data_snapshot import get_snapshot  # 0.2 s to import: only when needed

    name = model.split("/", 1)[1] if "/" in model else model
    try:
        _, found = get_snapshot().find_provider_model(name, None, None, None)
        price = found.get_prices(datetime.now(timezone.utc))
    except (LookupError, ValueError):
        return None
    inp, out = _mtok(getattr(price, "input_mtok", None)), _mtok(getattr(price, "output_mtok", None))
    if inp is None or out is None:
        return None
    return ModelPrice(input=inp, output=out, cached_input=_mtok(getattr(price, "cache_read_mtok", None)),
                      source="genai-prices")


class PriceTable:
    """The run's prices: its own overrides, then the maintained table."""

    def __init__(self, overrides: dict[str, Price] | None = None) -> None:
        self.overrides = dict(overrides or {})
        self._found: dict[str, ModelPrice | None] = {}

    def price(self, model: str) -> ModelPrice | None:
        if model not in self._found:
            self._found[model] = self._look_up(model)
        return self._found[model]

    def _look_up(self, model: str) -> ModelPrice | None:
        given = self.overrides.get(model)
        if given is None:
            prefixes = [p for p in self.overrides if model.startswith(p)]
            given = self.overrides[max(prefixes, key=len)] if prefixes else None
        if given is not None:
            return ModelPrice(input=given.input, output=given.output, cached_input=given.cached_input,
                              source="llm.prices")
        if model.startswith(MOCK):
            return ModelPrice(input=0.0, output=0.0, source="mock")
        return table_price(model)

    def cost(self, model: str, usage: Usage) -> float:
        """The dollars of ``usage`` (0 for a model with no known price: see :meth:`price`)."""
        price = self.price(model)
        return price.cost(usage) if price is not None else 0.0
