"""Prices of models, for the cost of every call."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from intellagent.llm.types import Usage
from intellagent.pipeline import Price
from intellagent.yamlio import read_yaml


@lru_cache(maxsize=1)
def default_prices() -> dict[str, Price]:
    data = read_yaml(Path(__file__).with_name("prices.yaml"))
    return {name: Price.model_validate(dict(value)) for name, value in data.items()}


class PriceTable:
    def __init__(self, overrides: dict[str, Price] | None = None) -> None:
        self.prices = {**default_prices(), **(overrides or {})}

    def price(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        prefixes = [p for p in self.prices if model.startswith(p)]
        return self.prices[max(prefixes, key=len)] if prefixes else None

    def cost(self, model: str, usage: Usage) -> float:
        price = self.price(model)
        if price is None:
            return 0.0
        return (usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1e6
