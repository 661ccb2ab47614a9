"""``tau-oracle``: a reference agent for testing the harness, not an agent under test. It needs
the task's ground truth: on its first turn it makes the ground-truth tool calls, then states the
required outputs."""

from __future__ import annotations

import json
from typing import Any

from intellagent.agent import Agent, AgentTurn
from intellagent.errors import ConfigError
from intellagent.llm.types import ToolCall


class TauOracleAgent(Agent):
    needs_ground_truth = True
    black_box = False  # its turns follow from the ground truth alone

    def __init__(self, config: Any, ctx: Any, ground_truth: Any = None) -> None:
        super().__init__(config, ctx, ground_truth)
        if ground_truth is None:
            raise ConfigError("tau-oracle needs scenarios with ground truth (events made from "
                              "tasks)", item="agent")
        self.acted = False

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        if not self.acted:
            self.acted = True
            calls = [ToolCall(id=f"oracle_{i}", name=a.name, arguments=json.dumps(a.arguments))
                     for i, a in enumerate(self.ground_truth.actions)]
            if calls:
                return AgentTurn(tool_calls=calls)
        if messages[-1]["role"] == "tool" or not any(m["role"] == "assistant" for m in messages[:-1]):
            outputs = ", ".join(self.ground_truth.outputs)
            return AgentTurn(content=f"Done. {outputs}".strip())
        return AgentTurn(content="Is there anything else I can help with?")

