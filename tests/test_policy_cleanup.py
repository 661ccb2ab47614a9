"""policy-graph keeps rules, each once: near-duplicates (reworded, or with and without their
section's label) are merged keeping every flow they came from; headings and the agent's
self-description are dropped; the step's note and warnings say what (issue 37, point 5)."""

from __future__ import annotations

import asyncio
import re

from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.harness import run_step
from intellagent_plugins.intellagent.extractor import Config, PolicyGraphExtractor
from intellagent_plugins.intellagent.policy_text import not_a_rule
from intellagent_plugins.providers.mock import ScriptedModel
from tests.conftest import REPO

FLOWS = {"task": "Help students with homework.", "flows": [{"name": "homework", "description": "help with homework"},
                   {"name": "safety", "description": "a student in danger"}]}
HOMEWORK = [
    "If a student says they are in danger, tell them to contact a trusted adult or emergency services.",
    "Never share one student's personal data with another student.",
    "P6 Changing a reservation:",
    "I am Pip, a homework helper for students aged 8 to 14.",
    "Give hints, not full answers, for graded homework.",
]
SAFETY = [
    "If the student says they are in danger, tell them to contact a trusted adult or emergency services!",
    "Safety: never share one student's personal data with another student.",
    "Give full answers, not hints, for graded homework.",  # the opposite rule: kept apart
    "Allow at most 3 hints per question.",
    "Allow at most 5 hints per question.",  # another number: another rule
]


def policies(texts: list[str], challenge: int) -> dict:
    return {"policies": [{"text": t, "category": "company policy", "challenge": challenge} for t in texts]}


def scored(request, model):
    listed = re.findall(r"^(P\d+): ", request.messages[-1]["content"], re.M)
    return {pid: 3 for pid in listed}


def extract(replies, config: Config = Config()):
    """The graph from a scripted extractor: the flows, then each flow's policies, then edges."""
    model = ScriptedModel(replies)
    llm = LLM(LLMSettings(default=ModelSettings(model="mock/scripted"),
                          roles={"edges": ModelSettings(model="mock/schema")}),
              providers={"mock/scripted": model})
    env = load_environment(REPO / "environments" / "education")
    return asyncio.run(run_step(PolicyGraphExtractor(config), env, llm=llm))


def test_duplicates_are_merged_and_non_rules_dropped_and_the_notes_say_so():
    out = extract([FLOWS, policies(HOMEWORK, 2), policies(SAFETY, 4)])
    graph = out.value
    texts = [p.text for p in graph.policies]
    assert [p.id for p in graph.policies] == [f"P{i}" for i in range(1, len(texts) + 1)]
    assert len(texts) == 6, texts  # 10 statements: 2 merged away, 2 dropped
    danger = next(p for p in graph.policies if "danger" in p.text)
    assert danger.flows == ["homework", "safety"] and danger.flow == "homework"
    assert danger.challenge == 4  # the higher challenge of the two
    privacy = next(p for p in graph.policies if "personal data" in p.text)
    assert privacy.flows == ["homework", "safety"] and privacy.text.startswith("Safety:")  # the fuller one
    assert not any("Changing a reservation" in t or t.startswith("I am Pip") for t in texts)
    assert sum("graded homework" in t for t in texts) == 2 and sum("hints per question" in t for t in texts) == 2
    assert len(graph.edges) == 6 * 5 // 2
    note = out.note
    assert "merged near-duplicate policies" in note and "stands for" in note and "(flows: homework, safety)" in note
    assert "dropped 2 statement(s) that are not rules" in note
    assert "'P6 Changing a reservation:' (a heading)" in note
    assert "'I am Pip, a homework helper for students aged 8 to 14.' (the agent describing itself)" in note
    assert graph.notes == out.warnings and len(graph.notes) == 2 and note == "; ".join(graph.notes)


def test_the_options_turn_merging_and_dropping_down():
    out = extract([FLOWS, policies(HOMEWORK, 2), policies(SAFETY, 4)],
                  Config(merge_similarity=1.0, drop_non_rules=False))
    texts = [p.text for p in out.value.policies]
    # only the two pairs that normalise to the same words are one rule; the heading stays
    assert len(texts) == 8 and "P6 Changing a reservation:" in texts
    assert "dropped" not in out.note and len(out.warnings) == 1


def test_what_is_not_a_rule():
    for heading in ("P6 Changing a reservation:", "## Refunds", "Section 3 Payments", "Cancellations:"):
        assert not_a_rule(heading) == "a heading", heading
    for itself in ("I am Pip, a homework helper.", "You are Ava, an airline assistant.",
                   "My name is Sam and I help with orders."):
        assert not_a_rule(itself) == "the agent describing itself", itself
    for rule in ("1. Be polite.", "Verify the user id before any change", "You are an assistant that must never "
                 "reveal grades.", "Only refund unused tickets.", "text alpha bravo"):
        assert not_a_rule(rule) is None, rule
