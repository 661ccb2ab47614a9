"""The live session between an agent under test and an environment: the toolbox that runs the
environment's tools on one conversation's database (recording every call with its result), and
the session that plays the agent's turns against it, one user message at a time."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from intellagent.agent import Agent, GuardedAgent
from intellagent.mutants import MutatedAgent, mutant_raised
from intellagent.environment import Database, Environment
from intellagent.environment.tools import ToolResult
from intellagent.events import Clock, Observe, ToolCallDone
from intellagent.offload import Offload, OffloadCrash, OffloadTimeout


class ToolCallRecord(BaseModel):
    """A tool call as made, with the result the agent saw."""

    id: str
    name: str
    arguments: str = Field(description="JSON text, as the agent wrote it.")
    output: str = ""
    error: bool = False


TOOL_CALLS_AS_TEXT = ("the agent wrote tool calls as text instead of calling the tools; check the "
                      "chat template and the tool-choice support of the server it runs on")


def tool_call_in_text(text: str | None, tool_names: set[str]) -> bool:
    """Does ``text`` hold a tool call written out (a JSON object naming one of the tools, bare,
    in a code fence or in <tool_call> tags) rather than made through the API?"""
    if not text or not tool_names or "{" not in text:
        return False
    decoder = json.JSONDecoder()
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        calls = value if isinstance(value, list) else [value]
        for call in calls:
            if isinstance(call, dict):
                inner = call.get("function") if isinstance(call.get("function"), dict) else call
                named = inner.get("name")
                if isinstance(named, str) and named in tool_names and any(
                        k in inner for k in ("arguments", "parameters")):
                    return True
        at = text.find("{", end)
    return False


class MutantFailed(Exception):
    """A mutant (standing in for the agent on a tool call) raised: the turn's agent-error."""


class ToolTimeout(Exception):
    """A tool of the environment did not return within its timeout: the conversation cannot go on
    (the call may still be writing to its database), and it is not the agent's fault."""


@dataclass
class ToolBox:
    """The environment's tools on one database; every call is recorded (as the agent made it,
    with what it got back). With ``offload``, calls run in its threads under the tool's timeout,
    so a tool that blocks stalls only its own conversation. Calls through :meth:`acall` run one
    at a time (an agent calling tools of its own may call several at once; the database takes one
    transaction at a time). With a ``mutant``, its fault applies to every call."""

    env: Environment
    db: Database | None
    records: list[ToolCallRecord] = field(default_factory=list)
    terminal_called: bool = False
    offload: Offload | None = None
    observe: Observe | None = None  # told of every call (progress, traces)
    hung: str | None = None  # a call outlasted its timeout: no further call runs on this database
    abandoned: bool = False  # a call's await was cancelled: its thread may still run it on the database
    mutant: Any = None  # a mutant's fault on the calls (intellagent.mutants.Mutant), or None
    mutant_failed: str | None = None  # the mutant raised on a call: the agent's turn failed with it
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.env.tools.values()]

    def call(self, name: str, arguments: str | dict[str, Any], call_id: str = "") -> ToolCallRecord:
        """Run a call here, in this thread."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        tool = self.env.tools.get(name)
        result = None
        if tool is not None:
            args, db = self._mutated(tool, text)
            try:
                result = self._answer(tool, args, tool.call(db, args))
            finally:
                if db is not self.db:
                    db.close()
        return self._record(call_id, name, text, result)

    def _mutated(self, tool: Any, text: str) -> tuple[Any, Database | None]:
        """The arguments and the database a call runs with: the agent's and the conversation's,
        unless a mutant changes them (a throwaway copy of the database for a call it drops)."""
        if self.mutant is None:
            return text, self.db
        try:
            args = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return text, self.db
        if not isinstance(args, dict):
            return text, self.db
        args = self._mutant("arguments", tool, args)
        scratch = self.db is not None and self._mutant("scratch", tool)
        return args, (self.db.copy() if scratch else self.db)

    def _answer(self, tool: Any, args: Any, result: ToolResult) -> ToolResult:
        """What the agent gets back: the tool's answer, or a mutant's in its place."""
        if self.mutant is None or not isinstance(args, dict):
            return result
        return self._mutant("result", tool, args, result)

    def _mutant(self, method: str, *args: Any) -> Any:
        """A call of the mutant's ``method``; one that raises is :class:`MutantFailed` (the
        mutant stands in for the agent: the turn's agent-error, never a crashed run)."""
        try:
            return getattr(self.mutant, method)(*args)
        except Exception as exc:
            raise MutantFailed(mutant_raised(self.mutant, method, exc)) from None

    async def acall(self, name: str, arguments: str | dict[str, Any], call_id: str = "") -> ToolCallRecord:
        """Run a call off the event loop (when the box has an ``offload``); raise
        :class:`ToolTimeout` when it outlasts its timeout. ``observe`` is told of it."""
        clock = Clock()
        try:
            record = await self._acall(name, arguments, call_id)
        except MutantFailed as exc:
            self.mutant_failed = str(exc)
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            record = self._record(call_id, name, text, ToolResult(output=f"Error: {exc}", error=True))
        except ToolTimeout:
            if self.observe is not None:
                self.observe(ToolCallDone(name=name, started=clock.started, seconds=clock.seconds,
                                          error=True, call_id=call_id))
            raise
        if self.observe is not None:
            self.observe(ToolCallDone(name=name, started=clock.started, seconds=clock.seconds,
                                      error=record.error, call_id=call_id))
        return record

    async def _acall(self, name: str, arguments: str | dict[str, Any], call_id: str) -> ToolCallRecord:
        async with self._lock:
            if self.hung:
                raise ToolTimeout(self.hung)
            if self.offload is None:
                return self.call(name, arguments, call_id)
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            tool = self.env.tools.get(name)
            result = None
            if tool is not None:
                timeout = tool.spec.timeout or self.env.tool_timeout
                args, db = self._mutated(tool, text)
                try:
                    result = self._answer(tool, args, await self.offload.run(tool.call, db, args,
                                                                             timeout=timeout))
                except OffloadTimeout:
                    self.hung = f"the environment's tool '{name}' did not return within {timeout:g} s"
                    raise ToolTimeout(self.hung) from None
                except asyncio.CancelledError:
                    self.abandoned = True
                    raise
                except OffloadCrash as exc:  # what Tool.call lets through: KeyboardInterrupt and kin
                    result = ToolResult(output=f"Error: tool '{name}' crashed: {exc}", error=True,
                                        crashed=True)
                finally:
                    if db is not self.db and not self.hung:
                        db.close()
            return self._record(call_id, name, text, result)

    def _record(self, call_id: str, name: str, text: str, result: ToolResult | None) -> ToolCallRecord:
        if result is None:
            record = ToolCallRecord(id=call_id, name=name, arguments=text,
                                    output=f"Error: unknown tool '{name}'", error=True)
        else:
            record = ToolCallRecord(id=call_id, name=name, arguments=text, output=result.output,
                                    error=result.error)
            if self.env.tools[name].spec.terminal and not result.error:
                self.terminal_called = True
        self.records.append(record)
        return record


class Reply(BaseModel):
    """The agent's answer to one user message, after the tool calls it made."""

    content: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    error: str | None = Field(default=None, description="The agent failed (agent-error).")
    infra: bool = Field(default=False, description="The failure was not the agent's: our own model "
                                                   "call, the agent out of reach, a tool that hung.")


class LiveSession:
    """One live conversation with an agent under test: each user message goes in, the agent's
    tool calls run on the toolbox's database and their results go back, until it replies
    without tool calls (or calls a terminal tool, or runs out of tool steps).

    An agent that runs its own tool loop (``runs_own_tools``) is given the toolbox for the whole
    conversation (``attach``; ``detach`` on :meth:`close`) and calls the tools itself, through an
    endpoint its plugin serves; the calls it made during a turn are recorded there, and become
    that turn's tool calls and messages exactly as if the harness had run them."""

    def __init__(self, agent: Agent, toolbox: ToolBox, system_prompt: str, *,
                 max_tool_steps: int = 10) -> None:
        self.agent = agent
        self.toolbox = toolbox
        self.max_tool_steps = max_tool_steps
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
        self.runs_own_tools = bool(getattr(agent, "runs_own_tools", False))
        mutated = agent.agent if isinstance(agent, GuardedAgent) else agent
        if isinstance(mutated, MutatedAgent):  # its fault applies to the calls the harness runs
            mutated.bind(toolbox)
        if self.runs_own_tools:
            agent.attach(toolbox)

    def close(self) -> None:
        """The conversation is over: an agent running its own tools can no longer reach them."""
        if self.runs_own_tools:
            self.runs_own_tools = False
            self.agent.detach()

    async def respond(self, message: str) -> Reply:
        self.messages.append({"role": "user", "content": message})
        made: list[ToolCallRecord] = []
        tools = self.toolbox.schemas()
        for _ in range(self.max_tool_steps):
            before = len(self.toolbox.records)
            turn = await self.agent.step(list(self.messages), tools)
            own = self.toolbox.records[before:]  # the calls the agent made itself meanwhile
            if own:
                made += own
                self._add_calls(own)
            if self.toolbox.hung:
                return Reply(tool_calls=made, error=self.toolbox.hung, infra=True)
            if self.toolbox.mutant_failed:
                return Reply(tool_calls=made, error=self.toolbox.mutant_failed)
            if turn.error:
                return Reply(tool_calls=made, error=turn.error, infra=turn.infra)
            self.messages.append(turn.as_message())
            if not turn.tool_calls or self.toolbox.terminal_called:
                return Reply(content=turn.content or "", tool_calls=made)
            for call in turn.tool_calls:
                try:
                    record = await self.toolbox.acall(call.name, call.arguments, call.id)
                except ToolTimeout as exc:
                    return Reply(tool_calls=made, error=str(exc), infra=True)
                made.append(record)
                if self.toolbox.mutant_failed:
                    return Reply(tool_calls=made, error=self.toolbox.mutant_failed)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": record.output})
                if self.toolbox.terminal_called:
                    return Reply(content=turn.content or "", tool_calls=made)
        return Reply(tool_calls=made, error=f"no reply after {self.max_tool_steps} tool steps")

    def _add_calls(self, records: list[ToolCallRecord]) -> None:
        """Calls the agent made itself, in the conversation as if it had asked for them."""
        self.messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": r.id, "type": "function", "function": {"name": r.name, "arguments": r.arguments}}
            for r in records]})
        self.messages += [{"role": "tool", "tool_call_id": r.id, "content": r.output} for r in records]
