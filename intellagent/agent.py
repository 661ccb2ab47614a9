"""What an agent under test gets: the environment's tools bound to the event's database."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from intellagent.artefacts import ToolCallRecord
from intellagent.environment import Database, Environment


@dataclass
class ToolBox:
    """The environment's tools on one event's database; every call is recorded."""

    env: Environment
    db: Database | None
    records: list[ToolCallRecord] = field(default_factory=list)
    terminal_called: bool = False

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.env.tools.values()]

    def call(self, name: str, arguments: str | dict[str, Any], call_id: str = "") -> ToolCallRecord:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        tool = self.env.tools.get(name)
        if tool is None:
            record = ToolCallRecord(id=call_id, name=name, arguments=text,
                                    output=f"Error: unknown tool '{name}'", error=True)
        else:
            result = tool.call(self.db, text)
            record = ToolCallRecord(id=call_id, name=name, arguments=text, output=result.output,
                                    error=result.error)
            if tool.spec.terminal and not result.error:
                self.terminal_called = True
        self.records.append(record)
        return record


class AgentReply(BaseModel):
    content: str = ""
    tool_calls: list[ToolCallRecord] = []
    error: str | None = None
    infra: bool = False  # the error was the model's infrastructure, not the agent


class Agent:
    """One conversation with the agent under test. ``respond`` gets the user's message and
    returns the agent's reply, after any tool calls it made."""

    async def respond(self, message: str, toolbox: ToolBox) -> AgentReply:
        raise NotImplementedError
