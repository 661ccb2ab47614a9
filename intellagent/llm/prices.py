"""Prices of models, for the cost of every call and the budget's reservations.

A model's price is, in order: the run's own (``llm.prices``: by exact name, then a key naming the
same model, a dated snapshot or a ``provider/`` spelling of it, then the longest ``prefix*``
key; a price that leaves out input or output is merged over the table's price of the model),
the maintained price table of the ``genai-prices`` package (bundled data, no network; a
``provider/`` prefix picks that provider's row, as LiteLLM names models), nothing for a ``mock/``
model. A model none of them knows has no price: its cost is unknown, not zero, and a dollar
budget refuses to run on it (a token budget still works). Cached prompt tokens are priced at the
cached rate where the price has one; a tiered price (Gemini's over 200k prompt tokens) is charged
at the tier the request's prompt reaches, as the provider bills it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Iterable

from intellagent.llm.types import Usage
from intellagent.pipeline import LLMSettings, Price

MOCK = "mock/"
Tiers = tuple[tuple[int, float], ...]  # (prompt tokens above which it applies, $ per million)


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per million tokens: prompt, cached prompt, completion (the base rates); where it
    comes from; and, for a tiered price, the dearer rates a request whose prompt is over a
    tier's start pays on all its tokens (genai-prices' threshold model)."""

    input: float
    output: float
    cached_input: float | None = None
    source: str = ""  # llm.prices, genai-prices, mock
    tiers: tuple[Tiers, Tiers, Tiers] | None = None  # input, output, cached input

    def rates(self, prompt_tokens: int) -> tuple[float, float, float]:
        """The input, output and cached input rates of a request with ``prompt_tokens``."""
        rates = [self.input, self.output, self.input if self.cached_input is None else self.cached_input]
        for i, tiers in enumerate(self.tiers or ()):
            for start, price in reversed(tiers):
                if prompt_tokens > start:
                    rates[i] = price
                    break
        return rates[0], rates[1], rates[2]

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        fresh = usage.prompt_tokens - cached
        inp, out, rate = self.rates(usage.prompt_tokens)
        return (fresh * inp + cached * rate + usage.completion_tokens * out) / 1e6

    def worst(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The most a request of that size can cost (no prompt token cached)."""
        inp, out, _ = self.rates(prompt_tokens)
        return (prompt_tokens * inp + completion_tokens * out) / 1e6


def _rate(value: Any) -> tuple[float | None, Tiers]:
    """A genai-prices price per million tokens: its base rate and its tiers."""
    if value is None:
        return None, ()
    tiers = getattr(value, "tiers", None)
    if tiers is not None:
        return float(value.base), tuple((int(t.start), float(t.price)) for t in tiers)
    return float(value), ()


def _find(model: str) -> tuple[Any, Any] | None:
    """genai-prices' (provider, model) for ``model``: a ``provider/`` prefix picks that
    provider (LiteLLM's names: ``groq/...``, ``openrouter/...``, ``bedrock/...``), else the name
    without it is matched across providers."""
    from genai_prices.data_snapshot import get_snapshot  # 0.2 s to import: only when needed

    snapshot = get_snapshot()
    refs = [(model, "litellm")]
    if "/" in model:
        refs.append((model.split("/", 1)[1], None))
    for ref, provider in refs:
        try:
            return snapshot.find_provider_model(ref, None, provider, None)
        except (LookupError, ValueError):
            continue
    return None


@lru_cache(maxsize=512)
def table_price(model: str) -> ModelPrice | None:
    """The genai-prices table's price of ``model`` (None when it does not know it)."""
    found = _find(model)
    if found is None:
        return None
    price = found[1].get_prices(datetime.now(timezone.utc))
    (inp, inp_tiers), (out, out_tiers) = _rate(getattr(price, "input_mtok", None)), \
        _rate(getattr(price, "output_mtok", None))
    cached, cached_tiers = _rate(getattr(price, "cache_read_mtok", None))
    if inp is None or out is None:
        return None
    tiered = inp_tiers or out_tiers or cached_tiers
    return ModelPrice(input=inp, output=out, cached_input=cached, source="genai-prices",
                      tiers=(inp_tiers, out_tiers, cached_tiers) if tiered else None)


@lru_cache(maxsize=512)
def table_model(model: str) -> str | None:
    """The model genai-prices takes ``model`` for (its id), None when it knows none."""
    found = _find(model)
    return found[1].id if found is not None else None


def _base(model: str) -> ModelPrice | None:
    """The price of ``model`` without the run's own: $0 for a mock model, else the table's."""
    return ModelPrice(input=0.0, output=0.0, source="mock") if model.startswith(MOCK) else table_price(model)


class PriceTable:
    """The run's prices: its own overrides, then the maintained table."""

    def __init__(self, overrides: dict[str, Price] | None = None) -> None:
        self.overrides = dict(overrides or {})
        self._found: dict[str, ModelPrice | None] = {}

    def price(self, model: str) -> ModelPrice | None:
        if model not in self._found:
            self._found[model] = self._look_up(model)
        return self._found[model]

    def _key(self, model: str) -> str | None:
        """The key of the run's own price of ``model``: its name (with or without its
        ``provider/`` prefix), a key the price table takes for the same model (``gpt-4o`` for
        ``gpt-4o-2024-08-06``; never ``gpt-4o-mini``, another model), the longest ``prefix*``."""
        bare = model.split("/", 1)[1] if "/" in model else None
        for name in (model, bare):
            if name is not None and name in self.overrides:
                return name
        names = [k for k in self.overrides if not k.endswith("*")]
        if names and not model.startswith(MOCK):
            same = table_model(model)
            if same is not None:
                for name in names:
                    if table_model(name) == same:
                        return name
        prefixes = [k for k in self.overrides if k.endswith("*") and model.startswith(k[:-1])]
        return max(prefixes, key=len) if prefixes else None

    def unused(self, models: Iterable[str]) -> list[str]:
        """The run's price keys that price none of ``models`` (a typo, or a model it does not
        call): their prices are not used."""
        used = {self._key(m) for m in models} if self.overrides else set()
        return [k for k in self.overrides if k not in used]

    def unused_warning(self, models: Iterable[str]) -> str | None:
        """One line naming the keys :meth:`unused` finds and the models the run calls, or None."""
        models = sorted(set(models))
        unused = self.unused(models)
        if not unused:
            return None
        one = len(unused) == 1
        return (f"llm.prices {'key' if one else 'keys'} {', '.join(repr(k) for k in unused)} "
                f"price{'s' if one else ''} no model this run calls (its models: {', '.join(models)}): "
                f"{'its price is' if one else 'their prices are'} not used; check "
                f"{'its' if one else 'their'} spelling")

    def missing(self, model: str) -> tuple[str, list[str]] | None:
        """The key of a partial price of ``model`` with nothing to merge over (a model the table
        does not know) and the fields it lacks; None when ``model`` has its price or none given."""
        key = self._key(model) if self.overrides else None
        if key is None:
            return None
        lacks = [f for f in ("input", "output") if getattr(self.overrides[key], f) is None]
        return (key, lacks) if lacks and _base(model) is None else None

    def _look_up(self, model: str) -> ModelPrice | None:
        key = self._key(model) if self.overrides else None
        if key is None:
            return _base(model)
        given = self.overrides[key]
        if given.input is not None and given.output is not None:  # a whole price: the run's own
            return ModelPrice(input=given.input, output=given.output, cached_input=given.cached_input,
                              source="llm.prices")
        base = _base(model)  # a part of one: merged over the table's price of the model
        if base is None:
            return None  # nothing to merge over (:meth:`missing`: the run refuses it)
        fields = (given.input, given.output, given.cached_input)
        return ModelPrice(
            input=base.input if given.input is None else given.input,
            output=base.output if given.output is None else given.output,
            cached_input=base.cached_input if given.cached_input is None else given.cached_input,
            source="llm.prices",
            tiers=tuple(t if f is None else () for t, f in zip(base.tiers, fields))  # type: ignore[arg-type]
            if base.tiers else None)

    def cost(self, model: str, usage: Usage) -> float:
        """The dollars of ``usage`` (0 for a model with no known price: see :meth:`price`)."""
        price = self.price(model)
        return price.cost(usage) if price is not None else 0.0


def unused_prices(settings: LLMSettings, roles: Iterable[str]) -> str | None:
    """A warning naming the keys of ``settings.prices`` that price no model of ``roles`` (a typo
    leaves the library's price in force), or None: the run and the commands that show a run's
    plan say it alike."""
    if not settings.prices:
        return None
    return PriceTable(settings.prices).unused_warning(settings.for_role(r).model for r in roles)
