"""The external check: ToolTalk's own ToolExecutor (from the nvidia-tooltalk package) and our
pipeline, on the same agent behaviours over all 78 conversations, give identical calls
(request, response, exception), identical match and incorrect-action flags, and identical
per-conversation and per-set metrics.

The reference compares free text with DistilBERT, which it would download; both scorers get
the same deterministic comparator instead, and the reference's unused imports (numpy, torch,
transformers) are stubbed inside this module only when they are not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from intellagent.llm import LLM
from intellagent.plan import load_plan
from intellagent.registry import load_registry
from intellagent.store import Store
from intellagent.testing.harness import run_step
from intellagent_plugins.tooltalk.agents import REFERENCE_AGENTS
from intellagent_plugins.tooltalk.artefacts import Conversation
from intellagent_plugins.tooltalk.comparators import token_sort
from intellagent_plugins.tooltalk.steps import (Conversations, ConversationsConfig, MatchCalls, MatchConfig,
                                                ReplayConfig, ReplayConversation)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None,
                                reason="ToolTalk's reference is not installed: "
                                       "pip install --no-deps nvidia-tooltalk")

BEHAVIOURS = list(REFERENCE_AGENTS)
COUNTERS = ("predictions", "ground_truths", "matches", "actions", "valid_actions", "bad_actions",
            "precision", "recall", "action_precision", "bad_action_rate", "success", "soft_success")


def reference_compare(prediction, truth):
    """ToolTalk's semantic_str_compare with our comparator in place of DistilBERT."""
    return 0.0 if prediction is None else token_sort(prediction, truth)


@pytest.fixture(scope="module")
def reference():
    """ToolTalk's apis and executor, importable offline, with the shared comparator."""
    saved = dict(sys.modules)
    for name in ("numpy", "torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            stub = types.ModuleType(name)
            stub.DistilBertModel = stub.DistilBertTokenizer = None
            sys.modules[name] = stub
    try:
        import tooltalk
        from tooltalk.apis import calendar, email, message, reminder
        from tooltalk.evaluation.metrics import get_metrics
        from tooltalk.evaluation.tool_executor import ToolExecutor

        for module in (calendar, email, message, reminder):
            module.semantic_str_compare = reference_compare
        yield types.SimpleNamespace(ToolExecutor=ToolExecutor, get_metrics=get_metrics,
                                    data=Path(tooltalk.__file__).parent / "data")
    finally:
        for name in set(sys.modules) - set(saved):
            del sys.modules[name]


def messages_of(history: list[dict]) -> list[dict]:
    """The reference's history as the chat messages our agents read."""
    messages = [{"role": "system", "content": ""}]
    for i, turn in enumerate(history):
        if turn["role"] in ("user", "assistant"):
            messages.append({"role": turn["role"], "content": turn["text"]})
            continue
        call_id = f"call_{i}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {
                "name": turn["request"]["api_name"], "arguments": json.dumps(turn["request"]["parameters"])}}]})
        messages.append({"role": "tool", "tool_call_id": call_id,
                         "content": json.dumps({"response": turn["response"], "exception": turn["exception"]})})
    return messages


def predictor(agent):
    """One of our reference agents as a ToolTalk predictor."""

    def predict(metadata, history):
        turn = agent.decide(messages_of(history))
        if turn.tool_calls:
            (call,) = turn.tool_calls
            return {"role": "api", "request": {"api_name": call.name, "parameters": json.loads(call.arguments)}}
        return {"role": "assistant", "text": turn.content}

    return predict


def run_reference(reference, behaviour: str, conversations: list[Conversation]) -> dict[str, dict]:
    executor = reference.ToolExecutor(init_database_dir=str(reference.data / "databases"))
    out = {}
    for conversation in conversations:
        data = conversation.reference_json()
        agent = REFERENCE_AGENTS[behaviour](None, None, conversation.model_dump(mode="json"))
        executor.run_conversation(data, predictor(agent))
        executor.evaluate_predictions(data)
        out[conversation.name] = data
    return out


def reference_calls(data: dict) -> list[tuple]:
    return [(i, p["request"]["api_name"], p["request"]["parameters"], p["response"], p["exception"],
             p["match"], p["bad_action"])
            for i, turn in enumerate(data["conversation"]) for p in turn.get("predictions", [])
            if p["role"] == "api"]


def our_calls(assessment) -> list[tuple]:
    return [(p.turn, p.call.request.api_name, p.call.request.parameters, p.call.response,
             p.call.exception, p.match, p.bad_action) for p in assessment.predictions]


class Scores:
    """The scores our match step emitted, as the metric plugins read them from a run."""

    def __init__(self, scores):
        self._scores = scores

    def scores(self, name=None, step=None):
        for score in self._scores:
            if name is None or score.name == name:
                yield None, score


@pytest.fixture(scope="module")
def env(reference):
    from intellagent.envs import environment_path
    from intellagent.environment import load_environment

    return load_environment(environment_path(load_registry(), "tooltalk"))


@pytest.fixture(scope="module")
def conversations(env):
    found = asyncio.run(run_step(Conversations(ConversationsConfig()), env))
    assert [sum(c.set == s for c in found) for s in ("easy", "hard")] == [28, 50]
    return found


def run_ours(env, behaviour: str, conversations: list[Conversation]):
    """Our replay and match steps, as the pipeline runs them, on every conversation."""
    agent_cls = REFERENCE_AGENTS[behaviour]
    replay_step, match_step = ReplayConversation(ReplayConfig()), MatchCalls(MatchConfig())
    llm = LLM(store=Store.in_memory())

    async def one(conversation):
        replayed = await run_step(replay_step, env, llm=llm, conversation=conversation,
                                  agent=lambda truth: agent_cls(None, None, truth))
        assert replayed.status == "ok", replayed.note
        return await run_step(match_step, env, llm=llm, replay=replayed.value, conversation=conversation)

    async def all_of():
        return [await one(c) for c in conversations]

    return asyncio.run(all_of())


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_identical_calls_flags_and_metrics(reference, env, conversations, behaviour):
    theirs = run_reference(reference, behaviour, conversations)
    ours = run_ours(env, behaviour, conversations)
    for conversation, output in zip(conversations, ours):
        data, assessment = theirs[conversation.name], output.value
        assert our_calls(assessment) == reference_calls(data), conversation.name
        assert [t.match for t in assessment.ground_truth] == \
            [a["match"] for turn in data["conversation"] for a in turn.get("apis", [])], conversation.name
        assert {k: getattr(assessment.metrics, k) for k in COUNTERS} == \
            {k: data["metrics"][k] for k in COUNTERS}, conversation.name

    # per set, the pipeline's own metric plugins against the reference's aggregation
    plan = load_plan("tooltalk", load_registry())
    scores = Scores([s for output in ours for s in output.scores])
    results = {name: metric.compute(scores) for name, metric in plan.metrics.items()}
    for set_name in ("easy", "hard"):
        total = Counter()
        for conversation in conversations:
            if conversation.set == set_name:
                total += theirs[conversation.name]["metrics"]
                total["num_conversations"] += 1
        expected = reference.get_metrics(total)
        row = {name: next(r for r in result.rows if r["set"] == set_name)
               for name, result in results.items()}
        assert row["success"]["rate"]["rate"] == round(expected["success_rate"], 4)
        assert row["precision"]["value"] == round(expected["precision"], 4)
        assert row["recall"]["value"] == round(expected["recall"], 4)
        assert row["action-precision"]["value"] == round(expected["action_precision"], 4)
        assert row["incorrect-action-rate"]["value"] == round(expected["bad_action_rate"], 4)
        soft = [theirs[c.name]["metrics"]["soft_success"] for c in conversations if c.set == set_name]
        assert row["soft-success"]["mean"] == round(sum(soft) / len(soft), 4)


def test_missing_and_unknown_arguments_fail_with_the_references_texts(reference, env, conversations):
    """Each easy conversation's ground-truth call, less one argument or plus an unknown one, run
    by ToolTalk's executor and by ours from the same state: the same exception text."""
    from intellagent_plugins.tooltalk.executor import World

    executor = reference.ToolExecutor(init_database_dir=str(reference.data / "databases"))
    compared = 0
    for conversation in conversations:
        if conversation.set != "easy":
            continue
        data = conversation.reference_json()
        (_, truth), = conversation.calls()
        given = {k: v for k, v in truth.request.parameters.items() if k != "session_token"}
        variants = [{k: v for k, v in given.items() if k != drop} for drop in given]
        variants += [{**given, "colour": "red"}, {"colour": "red"}]
        world = World(env, conversation)
        for arguments in variants:
            executor.init_conversation_state(data["metadata"], [], data["user"])
            _, theirs = executor.execute_tool(truth.request.api_name, dict(arguments))
            db = world.fresh(before_turn=0)
            ours = world.execute(db, truth.request.api_name, dict(arguments))
            db.close()
            assert (ours.exception, ours.response) == (theirs["exception"], theirs["response"]), \
                (conversation.name, arguments)
            compared += ours.exception is not None and ".call()" in ours.exception
        world.close()
    assert compared >= 60
