"""``mock/demo``: scripted, realistic answers for every role of a run on a customer-service
environment (the quickstart's airline), offline and deterministic, so its report reads like a
real run: flows and policies read from the agent's prompt, scenarios that put them to the test,
a simulated user that plays them, an agent with a few bad habits, and a judge that reads the
transcript. Any other question is answered as ``mock/schema`` answers it. Every report of a run
on it says it is a demo (the model's ``notice``)."""

from __future__ import annotations

import json
import random
import re
from typing import Any, TypeVar

from pydantic import BaseModel

from intellagent.llm.types import ChatReply, ChatRequest, ToolCall, Usage
from intellagent_plugins.providers.demo.agent import Agent, State
from intellagent_plugins.providers.demo.judge import judgement
from intellagent_plugins.providers.demo.rules import affinity, category_of, challenge_of
from intellagent_plugins.providers.demo.scenarios import rows_answer, scenario_answer
from intellagent_plugins.providers.demo.texts import between, listed_policies, sections
from intellagent_plugins.providers.demo.user import User, UserView
from intellagent_plugins.providers.mock import SchemaModel, estimate_usage

M = TypeVar("M", bound=BaseModel)
NOTICE = ("Demo run: every answer (policies, scenarios, the simulated user, the agent under test, the "
          "judge) was scripted by mock/demo, offline; no model was called. Use a real model for real results.")


def partial_notice(played: list[str], others: list[str]) -> str:
    """The notice of a run where only the roles ``played`` were mock/demo's."""
    return (f"Partly a demo run: the answers of {', '.join(played)} were scripted by mock/demo, offline; "
            f"only {', '.join(others)} called {'its' if len(others) == 1 else 'their'} model. "
            "Read the results with that in mind; use real models for real results.")


def _text(request: ChatRequest) -> str:
    return "\n\n".join(m.get("content") or "" for m in request.messages if m.get("role") != "system")


def _prompt_of(text: str) -> str:
    return between(text, "Agent prompt:", ("\n\nFlow:", "\n\nTask:", "\n\nPolicy under study", "\n\nPolicy A",
                                           "\n\nDescribe the agent", "\n\nList the distinct", "\n\nPolicies to test"))


def _keys(model: type[BaseModel]) -> list[str]:
    keys = getattr(model, "keys", None)
    if isinstance(keys, tuple):
        return list(keys)
    return [f.alias or name for name, f in model.model_fields.items()]


class DemoModel(SchemaModel):
    """Deterministic: the same seed and request give the same answer."""

    notice = NOTICE

    def _answer(self, request: ChatRequest, name: str, model: type[BaseModel], rng: random.Random) -> Any:
        text = _text(request)
        if name in ("TaskAndFlows", "FlowsOnly"):
            intro, found = sections(_prompt_of(text))
            flows = [{"name": s.heading.lower(), "description": s.rules[0][:200]} for s in found][:12]
            return {"task": intro, "flows": flows} if name == "TaskAndFlows" else {"flows": flows}
        if name == "FlowPolicies":
            heading = between(text, "Flow:", ("\n\nList every policy",)).split(" — ")[0].strip().lower()
            found = {s.heading.lower(): s for s in sections(_prompt_of(text))[1]}
            rules = found[heading].rules if heading in found else []
            return {"policies": [{"text": r, "category": category_of(r), "challenge": challenge_of(r)}
                                 for r in rules[:15]]}
        if name.startswith("EdgeScores"):
            studied = re.search(r"Policy under study \((?P<id>[^)]+)\): (?P<text>.*)", text)
            others = dict(re.findall(r"^([A-Za-z][\w-]*): (.+)$", text.split("Answer with a score for every policy id.")[-1], re.M))
            return {key: affinity(studied["text"] if studied else "", others.get(key, "")) for key in _keys(model)}
        if name == "PairScore":
            a = re.search(r"Policy A \([^)]+\): (.*)", text)
            b = re.search(r"Policy B \([^)]+\): (.*)", text)
            return {"weight": affinity(a[1] if a else "", b[1] if b else "")}
        if name == "ScenarioDraft":
            ids = list(getattr(model, "keys", ()))
            tables = re.search(r"its table \(one of: ([^)]*)\)", text)
            return scenario_answer(ids, listed_policies(text, ids), tables[1].split(", ") if tables else [], rng)
        if name == "RowsDraft":
            return rows_answer(request.messages[-1].get("content") or "", rng)
        if name == "StopCheck":
            return {"correct": True, "feedback": ""}
        if name == "UserTurn":
            return User(UserView(request.messages)).turn()
        if name == "Judgement":
            return judgement(text, list(getattr(model, "keys", ())))
        return None

    async def structured(self, request: ChatRequest, response_model: type[M],
                         validation_retries: int) -> tuple[M, Usage]:
        rng = self._rng(request)
        answer = self._answer(request, response_model.__name__, response_model, rng)
        if answer is None:
            return await super().structured(request, response_model, validation_retries)
        self.requests += 1
        value = response_model.model_validate(answer)
        return value, estimate_usage(request, json.dumps(answer, default=str))

    async def chat(self, request: ChatRequest) -> ChatReply:
        self.requests += 1
        text, call = Agent(State.read(request.messages, request.tools or [], self.seed)).step()
        if call is None:
            return ChatReply(content=text, finish_reason="stop", usage=estimate_usage(request, text))
        rng = self._rng(request)
        tool = ToolCall(id=f"call_{rng.getrandbits(32):08x}", name=call[0], arguments=json.dumps(call[1]))
        return ChatReply(content=text or None, tool_calls=[tool], finish_reason="tool_calls",
                         usage=estimate_usage(request, text + tool.arguments))
