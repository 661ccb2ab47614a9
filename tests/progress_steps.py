"""A small pipeline whose steps take a while and spend differently, for the progress tests (in
process and in a subprocess on a pseudo-terminal): ``numbers`` makes N items, ``cheap`` asks the
model once per item, ``dear`` three times; each item waits ``pause`` seconds."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path

from pydantic import BaseModel

from intellagent import hookimpl
from intellagent.model import StrictModel
from intellagent.steps import Generator, Sampler


class Number(BaseModel):
    id: str
    value: int


class Answer(BaseModel):
    text: str


class NumbersConfig(StrictModel):
    items: int = 6


class Numbers(Sampler):
    name = "numbers"
    Config = NumbersConfig
    output = list[Number]

    def run(self, ctx):
        return [Number(id=f"N{i}", value=i) for i in range(self.config.items)]


class PayConfig(StrictModel):
    calls: int = 1
    pause: float = 0.0


class Pay(Generator):
    """Asks the model ``calls`` times about its number, after ``pause`` seconds."""

    name = "pay"
    Config = PayConfig
    inputs = {"number": Number}
    output = Number
    roles = {"default": "answers"}

    async def run(self, ctx, number):
        await asyncio.sleep(self.config.pause)
        for i in range(self.config.calls):
            question = f"{ctx.step}: number {number.value}, ask {i}"
            await ctx.llm.structured([{"role": "user", "content": question}], Answer, role="default")
        return number


def plugin() -> types.ModuleType:
    module = types.ModuleType("progress_steps")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: [register(Numbers), register(Pay)])
    return module


def pipeline(items: int = 6, pause: float = 0.0) -> dict:
    """``cheap`` spends one call per item, ``dear`` three (mock/schema at $1,000 a million
    tokens, so every call costs something)."""
    return {"llm": {"default": {"model": "mock/schema"},
                    "prices": {"mock/schema": {"input": 1000.0, "output": 1000.0}}},
            "steps": {"numbers": {"use": "acme/numbers", "with": {"items": items}},
                      "cheap": {"use": "acme/pay", "each": "numbers", "with": {"pause": pause}},
                      "dear": {"use": "acme/pay", "each": "cheap", "with": {"calls": 3, "pause": pause}}},
            "report": []}


def write_pipeline(folder: Path, **kw) -> Path:
    path = folder / "progress.yaml"
    path.write_text(json.dumps(pipeline(**kw)))
    return path
