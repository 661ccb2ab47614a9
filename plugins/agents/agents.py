"""Agents under test.

- ``openai-tools``: the environment's prompt and tools on any OpenAI-compatible model (the
  ``agent`` model role), with native tool calling; tools run on the event's database.
- ``http``: an endpoint of yours. Each step IntellAgent POSTs ``{"messages": [...], "tools":
  [...]}`` (OpenAI chat format, system prompt first) and expects ``{"content": str | null,
  "tool_calls": [{"id", "name", "arguments"}]}``; it runs the tool calls and posts again with
  the results until a reply has no tool calls.
- ``python``: ``module:callable`` called as ``fn(messages, toolbox)`` (sync or async) returning
  the reply text; ``toolbox.call(name, arguments)`` runs a tool.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import Field

from intellagent.agent import Agent, AgentReply, ToolBox
from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError
from intellagent.llm.types import ChatReply, ToolCall
from intellagent.model import StrictModel


class ToolLoopAgent(Agent):
    """Ask for a reply; run its tool calls; ask again; until a reply has no tool calls."""

    def __init__(self, config: Any, ctx: Any, event: Any = None) -> None:
        self.config = config
        self.ctx = ctx
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": ctx.env.prompt}]

    async def complete(self, tools: list[dict[str, Any]]) -> tuple[ChatReply | None, str | None]:
        raise NotImplementedError

    async def respond(self, message: str, toolbox: ToolBox) -> AgentReply:
        self.messages.append({"role": "user", "content": message})
        made = []
        for _ in range(self.config.max_tool_steps):
            reply, error = await self.complete(toolbox.schemas())
            if reply is None:
                return AgentReply(tool_calls=made, error=error, infra=True)
            self.messages.append(reply.as_message())
            if not reply.tool_calls:
                return AgentReply(content=reply.content or "", tool_calls=made)
            for call in reply.tool_calls:
                record = toolbox.call(call.name, call.arguments, call.id)
                made.append(record)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": record.output})
            if toolbox.terminal_called:
                return AgentReply(content="", tool_calls=made)
        return AgentReply(tool_calls=made, error=f"no reply after {self.config.max_tool_steps} tool steps")


class OpenAIToolsConfig(StrictModel):
    max_tool_steps: int = Field(default=10, ge=1)


class OpenAIToolsAgent(ToolLoopAgent):
    Config = OpenAIToolsConfig

    async def complete(self, tools):
        outcome = await self.ctx.llm.chat(self.messages, role="agent", stage="simulate",
                                          tools=tools or None)
        return (outcome.value, None) if outcome.ok else (None, outcome.error)


class HttpConfig(StrictModel):
    url: str
    timeout: float = Field(default=60.0, gt=0)
    max_tool_steps: int = Field(default=10, ge=1)


class HttpAgent(ToolLoopAgent):
    Config = HttpConfig

    async def complete(self, tools):
        try:
            timeout = aiohttp.ClientTimeout(total=self.config.timeout)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(self.config.url, json={"messages": self.messages,
                                                               "tools": tools}) as response:
                    if response.status >= 400:
                        return None, f"agent endpoint answered {response.status}"
                    data = await response.json(content_type=None)
            calls = [ToolCall(id=c.get("id", f"call_{i}"), name=c["name"],
                              arguments=c["arguments"] if isinstance(c.get("arguments"), str)
                              else json.dumps(c.get("arguments", {})))
                     for i, c in enumerate(data.get("tool_calls") or [])]
            return ChatReply(content=data.get("content"), tool_calls=calls), None
        except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, TypeError, ValueError) as exc:
            return None, f"agent endpoint failed: {type(exc).__name__}: {exc}"


class PythonConfig(StrictModel):
    callable: str = Field(description="'module:function' or 'file.py:function'.")


class PythonAgent(Agent):
    Config = PythonConfig

    def __init__(self, config: PythonConfig, ctx: Any, event: Any = None) -> None:
        try:
            self.fn = resolve(config.callable, Path.cwd())
        except ReferenceError_ as exc:
            raise ConfigError(f"python agent: {exc}", item="agent") from None
        self.history: list[dict[str, Any]] = []

    async def respond(self, message: str, toolbox: ToolBox) -> AgentReply:
        self.history.append({"role": "user", "content": message})
        start = len(toolbox.records)
        try:
            result = self.fn(list(self.history), toolbox)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # the agent's own failure: reported, the run goes on
            return AgentReply(tool_calls=toolbox.records[start:], error=f"{type(exc).__name__}: {exc}")
        self.history.append({"role": "assistant", "content": str(result)})
        return AgentReply(content=str(result), tool_calls=toolbox.records[start:])


class OracleConfig(StrictModel):
    """No options: the oracle knows the event's ground truth."""


class TauOracleAgent(Agent):
    """A reference agent for testing the harness: on the first message it performs the event's
    ground-truth actions and states the required outputs."""

    Config = OracleConfig

    def __init__(self, config: Any, ctx: Any, event: Any = None) -> None:
        if event is None or not event.task:
            raise ConfigError("tau-oracle needs events made from ground-truth tasks", item="agent")
        self.task = event.task
        self.done = False

    async def respond(self, message: str, toolbox: ToolBox) -> AgentReply:
        if self.done:
            return AgentReply(content="Is there anything else I can help with?")
        self.done = True
        start = len(toolbox.records)
        for action in self.task["actions"]:
            toolbox.call(action["name"], action["kwargs"], f"oracle_{len(toolbox.records)}")
            if toolbox.terminal_called:
                break
        outputs = ", ".join(self.task.get("outputs") or [])
        return AgentReply(content=f"Done. {outputs}".strip(), tool_calls=toolbox.records[start:])
