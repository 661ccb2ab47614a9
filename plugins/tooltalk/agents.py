"""Reference agents for testing the ToolTalk harness, not agents under test: they need the
conversation's ground truth. Each makes its calls one at a time and then says the ground truth's
reply.

- ``oracle``: exactly the ground-truth calls of each turn;
- ``drop``: no calls in the first turn that has some;
- ``wrong-argument``: the first ground-truth call that has an argument gets a wrong value for it
  (a date a day later, a time an hour later, a string reversed, each list element so, a number
  plus one);
- ``extra-action``: after the first turn's ground-truth calls, sets an alarm at 06:00:00;
- ``extra-non-action``: after the first turn's ground-truth calls, asks the current weather at
  the user's location;
- ``early-call``: the first call of the second turn that has calls (or of the first one, if it is
  not the conversation's first assistant turn) is made at the end of the assistant turn before.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, ClassVar

from intellagent.agent import Agent, AgentTurn
from intellagent.errors import ConfigError
from intellagent.llm.types import ToolCall
from intellagent_plugins.tooltalk.artefacts import Conversation
from intellagent_plugins.tooltalk.environment.tools import CLOCK, STAMP

Plan = list[list[tuple[str, dict[str, Any]]]]


def wrong(value: Any) -> Any:
    """A plausible but wrong value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, list):
        return [wrong(v) for v in value] or ["wrong"]
    if isinstance(value, str):
        for pattern, step in ((STAMP, timedelta(days=1)), (CLOCK, timedelta(hours=1))):
            try:
                return (datetime.strptime(value, pattern) + step).strftime(pattern)
            except ValueError:
                pass
        flipped = value[::-1]
        return flipped if flipped != value else value + "-wrong"
    return "wrong"


def position(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(which assistant turn this is, counting from 0; calls already made in it)."""
    replies = [i for i, m in enumerate(messages)
               if m["role"] == "user" or (m["role"] == "assistant" and not m.get("tool_calls"))]
    turn = sum(1 for m in messages if m["role"] == "assistant" and not m.get("tool_calls"))
    made = sum(1 for m in messages[(replies[-1] + 1 if replies else 0):] if m["role"] == "tool")
    return turn, made


class OracleAgent(Agent):
    """Makes the ground-truth calls of each turn, then says the ground-truth reply."""

    needs_ground_truth: ClassVar[bool] = True
    black_box: ClassVar[bool] = False  # its turns follow from the ground truth alone
    behaviour: ClassVar[str] = "oracle"

    def __init__(self, config: Any, ctx: Any, ground_truth: Any = None) -> None:
        super().__init__(config, ctx, ground_truth)
        if ground_truth is None:
            raise ConfigError(f"tooltalk/{self.behaviour} needs ToolTalk conversations", item="agent")
        self.conversation = Conversation.model_validate(ground_truth)
        self.assistant = [t for t in self.conversation.conversation if t.role == "assistant"]
        truth = [[(c.request.api_name, {k: v for k, v in (c.request.parameters or {}).items()
                                         if k != "session_token"}) for c in (t.apis or [])]
                 for t in self.assistant]
        self.plan = self.perturb(truth)

    def perturb(self, plan: Plan) -> Plan:
        return plan

    def decide(self, messages: list[dict[str, Any]]) -> AgentTurn:
        turn, made = position(messages)
        if turn >= len(self.assistant):
            return AgentTurn(content="")
        calls = self.plan[turn]
        if made < len(calls):
            name, arguments = calls[made]
            return AgentTurn(tool_calls=[ToolCall(id=f"{self.behaviour}_{turn}_{made}", name=name,
                                                  arguments=json.dumps(arguments))])
        return AgentTurn(content=self.assistant[turn].text or "")

    async def step(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentTurn:
        return self.decide(messages)


def _first_with_calls(plan: Plan) -> int | None:
    return next((i for i, calls in enumerate(plan) if calls), None)


class DropAgent(OracleAgent):
    behaviour = "drop"

    def perturb(self, plan: Plan) -> Plan:
        first = _first_with_calls(plan)
        if first is not None:
            plan[first] = []
        return plan


class WrongArgumentAgent(OracleAgent):
    behaviour = "wrong-argument"

    def perturb(self, plan: Plan) -> Plan:
        for calls in plan:
            for i, (name, arguments) in enumerate(calls):
                if arguments:
                    key = next(iter(arguments))
                    calls[i] = (name, {**arguments, key: wrong(arguments[key])})
                    return plan
        return plan


class ExtraActionAgent(OracleAgent):
    behaviour = "extra-action"

    def extra(self) -> tuple[str, dict[str, Any]]:
        return "AddAlarm", {"time": "06:00:00"}

    def perturb(self, plan: Plan) -> Plan:
        first = _first_with_calls(plan)
        if first is not None:
            plan[first] = plan[first] + [self.extra()]
        return plan


class ExtraNonActionAgent(ExtraActionAgent):
    behaviour = "extra-non-action"

    def extra(self) -> tuple[str, dict[str, Any]]:
        return "CurrentWeather", {"location": self.conversation.metadata.get("location", "")}


class EarlyCallAgent(OracleAgent):
    behaviour = "early-call"

    def perturb(self, plan: Plan) -> Plan:
        with_calls = [i for i, calls in enumerate(plan) if calls]
        if len(with_calls) > 1:
            target = with_calls[1]
        elif with_calls and with_calls[0] > 0:
            target = with_calls[0]
        else:
            return plan
        plan[target - 1] = plan[target - 1] + [plan[target][0]]
        plan[target] = plan[target][1:]
        return plan


REFERENCE_AGENTS: dict[str, type[OracleAgent]] = {
    a.behaviour: a for a in (OracleAgent, DropAgent, WrongArgumentAgent, ExtraActionAgent,
                             ExtraNonActionAgent, EarlyCallAgent)}
