"""A run's data as reports read it: each item's scores are read from their stored text once per
run's data, however many walks (one per metric) ask for them, and each walk gets them unchanged."""

from __future__ import annotations

import asyncio

import pytest

from intellagent import results
from intellagent.environment import load_environment
from intellagent.plan import load_plan
from intellagent.registry import load_registry
from intellagent.results import RunData
from intellagent.runner import run_plan
from intellagent.steps import Score
from intellagent.store import Store


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    plan = load_plan(None, registry, params={"events": "6"},
                     overrides=[("llm.default", {"model": "mock/demo"}, "test")])
    store = Store.for_workspace(tmp)
    result = asyncio.run(run_plan(plan, env, store=store, registry=registry, workspace=None,
                                  progress_stream=open("/dev/null", "w")))
    return store, result.run_id, plan


def _read_counted(monkeypatch) -> list[str]:
    """The score texts parsed from now on (pydantic's reader, as the run's data calls it)."""
    parsed: list[str] = []
    reader = results._SCORES

    class Counting:
        def validate_json(self, text):
            parsed.append(text)
            return reader.validate_json(text)

    monkeypatch.setattr(results, "_SCORES", Counting())
    return parsed


def _walk(data: RunData) -> list[tuple[str, str, dict]]:
    return [(item.step, item.item, score.model_dump()) for item, score in data.scores()]


def test_walks_read_each_items_scores_once_and_see_the_same_scores(run, monkeypatch):
    store, run_id, plan = run
    parsed = _read_counted(monkeypatch)
    data = RunData(store, run_id, plan)
    first = _walk(data)
    texts = [item.scores_json for item in data.items(scored=True)]
    assert first and len(parsed) == len(texts) == len(set(texts))  # (every item's scores differ)
    assert [_walk(data) for _ in range(3)] == [first] * 3
    assert len(parsed) == len(texts)  # the later walks read nothing anew
    # the same as reading every item's text afresh
    fresh = [(item.step, item.item, s.model_dump()) for item in data.items(scored=True)
             for s in results.TypeAdapter(list[Score]).validate_json(item.scores_json)]
    assert fresh == first


def test_a_walk_that_changes_its_list_does_not_change_the_next_walks(run):
    store, run_id, plan = run
    data = RunData(store, run_id, plan)
    item = next(data.items(scored=True))
    item.scores.clear()
    again = next(data.items(scored=True))
    assert again.item == item.item and again.scores


def test_past_the_bound_the_first_items_stay_read_and_the_rest_are_read_each_walk(run, monkeypatch):
    store, run_id, plan = run
    monkeypatch.setattr(results, "SCORES_KEPT", 2)
    parsed = _read_counted(monkeypatch)
    data = RunData(store, run_id, plan)
    first = _walk(data)
    n = len(parsed)
    assert n > 2
    assert _walk(data) == first
    assert len(parsed) == n + (n - 2)  # the two kept are not read again; the others are
    assert len(data._scores_read) == 2


def test_a_cell_shows_a_value_as_text_cut_to_its_limit():
    from intellagent_plugins.dialogue.views import cell_text

    assert cell_text(None) == "" and cell_text(5) == "5" and cell_text(True) == "True"
    assert cell_text("x" * 160) == "x" * 160 and cell_text("x" * 161) == "x" * 160 + "…"
    assert cell_text({"a": [1, None], "b": {"c": "d"}}) == "a: [1, ]; b: c: d"
    assert cell_text({"k": "y" * 300}) == "k: " + "y" * 157 + "…"
    assert cell_text(["z" * 10] * 30, limit=25) == "[" + "z" * 10 + ", " + "z" * 10 + ", …"


def test_coverage_reads_only_status_and_policies_and_counts_as_the_whole_events_say(run):
    store, run_id, plan = run
    data = RunData(store, run_id, plan)
    metric = next(m for m in plan.metrics.values() if m.name == "coverage")
    got = metric.compute(data).values
    graph = data.value(metric.config.graph)
    events = [e for _, e in data.values(metric.config.events)]  # decoded whole, as Event
    ok = [e for e in events if e.status == "ok"]
    assert ok
    covered = {p for e in ok for p in e.spec.policies}
    policies = {p.id for p in graph.policies}
    met = {frozenset((a, b)) for e in ok for a in e.spec.policies for b in e.spec.policies if a != b}
    pairs = {frozenset((e.a, e.b)) for e in graph.edges if e.weight > 0}
    assert got == {"policies": round(len(covered & policies) / len(policies), 4),
                   "pairs": round(len(met & pairs) / len(pairs), 4)}
