"""Agents under test. Each takes the conversation so far and the tools, and returns one turn;
the harness runs the tool calls and comes back with their results.

- ``openai-tools``: the environment's prompt and tools on any OpenAI-compatible model (the
  ``agent`` model role), with native tool calling.
- ``http``: an endpoint of yours. IntellAgent POSTs ``{"messages": [...], "tools": [...]}``
  (OpenAI chat format, system prompt first, tool results as ``role: tool`` messages) and expects
  ``{"content": str | null, "tool_calls": [{"id", "name", "arguments"}]}``.
- ``python``: ``module:callable`` called as ``fn(messages, tools)`` (sync or async), returning
  the reply text, or ``{"content": ..., "tool_calls": [{"name", "arguments"}]}``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import Field

from intellagent.agent import Agent, AgentTurn
from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError
from intellagent.llm.types import ToolCall
from intellagent.model import StrictModel


def turn_from(data: Any) -> AgentTurn:
    """An agent's answer (text, or a dict with content and tool calls) as a turn."""
    if isinstance(data, AgentTurn):
        return data
    if isinstance(data, str):
        return AgentTurn(content=data)
    if not isinstance(data, dict):
        raise TypeError(f"expected text or an object with content and tool_calls, got {type(data).__name__}")
    calls = []
    for i, c in enumerate(data.get("tool_calls") or []):
        fn = c.get("function") if isinstance(c.get("function"), dict) else c
        arguments = fn.get("arguments", {})
        calls.append(ToolCall(id=str(c.get("id") or f"call_{i}"), name=fn["name"],
                              arguments=arguments if isinstance(arguments, str) else json.dumps(arguments)))
    content = data.get("content")
    return AgentTurn(content=content if content is None else str(content), tool_calls=calls)


class OpenAIToolsAgent(Agent):
    """The environment's prompt and tools on an OpenAI-compatible chat model."""

    roles = {"agent": "the model of the agent under test"}

    async def step(self, messages, tools):
        outcome = await self.ctx.llm.chat(messages, role="agent", tools=tools or None)
        if not outcome.ok:
            return AgentTurn(error=outcome.error, infra=True)
        reply = outcome.value
        return AgentTurn(content=reply.content, tool_calls=reply.tool_calls)


class HttpConfig(StrictModel):
    url: str
    timeout: float = Field(default=60.0, gt=0)


class HttpAgent(Agent):
    """Your agent behind an HTTP endpoint (contract in the module docstring)."""

    Config = HttpConfig

    async def step(self, messages, tools):
        try:
            timeout = aiohttp.ClientTimeout(total=self.config.timeout)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(self.config.url, json={"messages": messages,
                                                               "tools": tools}) as response:
                    if response.status >= 400:
                        return AgentTurn(error=f"agent endpoint answered {response.status}")
                    data = await response.json(content_type=None)
            return turn_from(data)
        except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, TypeError, ValueError) as exc:
            return AgentTurn(error=f"agent endpoint failed: {type(exc).__name__}: {exc}")


class PythonConfig(StrictModel):
    callable: str = Field(description="'module:function' or 'file.py:function'.")


class PythonAgent(Agent):
    """A Python function of yours: ``fn(messages, tools)``."""

    Config = PythonConfig

    def __init__(self, config: PythonConfig, ctx: Any, ground_truth: Any = None) -> None:
        super().__init__(config, ctx, ground_truth)
        try:
            self.fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            raise ConfigError(f"python agent: {exc}", item="agent") from None

    @classmethod
    def check(cls, config: PythonConfig) -> str | None:
        try:
            fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            return f"python agent: {exc}"
        return None if callable(fn) else f"python agent: '{config.callable}' is not callable"

    async def step(self, messages, tools):
        try:
            result = self.fn(messages, tools)
            if inspect.isawaitable(result):
                result = await result
            return turn_from(result)
        except Exception as exc:  # the agent's own failure: reported, the run goes on
            return AgentTurn(error=f"{type(exc).__name__}: {exc}")
