"""What reports read of a run: a metric that reads two fields of each event, and a table cell."""

from __future__ import annotations

import asyncio

import pytest

from intellagent.environment import load_environment
from intellagent.plan import load_plan
from intellagent.registry import load_registry
from intellagent.results import RunData
from intellagent.runner import run_plan
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
