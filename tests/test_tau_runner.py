"""τ-bench tasks inside IntellAgent: the oracle agent passes every task; an agent that does
nothing fails exactly the tasks that need a change or an answer; pass^k is the unbiased
estimator."""

from __future__ import annotations

import json
import math

import pytest

from intellagent.artefacts import Event, EventSpec, Verdict
from intellagent.cli import cli
from intellagent.report import EventResult, pass_hat_k
from tests.conftest import TAU_BENCH

pytestmark = pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")


def idle_agent(messages, toolbox):
    return "I cannot help with that."


def run_tasks(runner, tmp_path, domain, split, agent, trials=1):
    pipeline = tmp_path / "tau.yaml"
    from intellagent.engine import builtin_pipeline

    text = builtin_pipeline("tau-bench").read_text()
    text = text.replace("tasks: tasks_test.json, trials: 1", f"tasks: tasks_{split}.json, trials: {trials}")
    text = text.replace("agent: {use: openai-tools}", f"agent: {agent}")
    pipeline.write_text(text)
    ws = tmp_path / f"ws-{domain}-{split}"
    result = runner.invoke(cli, ["run", domain, "--pipeline", str(pipeline), "--data",
                                 str(TAU_BENCH / domain), "--workspace", str(ws)])
    assert result.exit_code == 0, result.output + str(result.exception)
    return json.loads(next(ws.glob("runs/*/report.json")).read_text())


@pytest.mark.parametrize("domain,split,count", [("airline", "test", 50), ("retail", "test", 115),
                                                ("retail", "dev", 20)])
def test_oracle_agent_passes_every_task(runner, tmp_path, domain, split, count):
    report = run_tasks(runner, tmp_path, domain, split, "{use: tau-oracle}")
    assert report["totals"] == {"events": count, "pass": count}
    assert report["pass_hat_k"] == {"1": 1.0}


def test_an_idle_agent_fails_the_tasks_that_need_work(runner, tmp_path):
    report = run_tasks(runner, tmp_path, "retail", "dev", "{use: python, with: {callable: 'tests.test_tau_runner:idle_agent'}}")
    golden = {t["task"]: t for t in json.loads((TAU_BENCH / "retail" / "golden_dev.json").read_text())["tasks"]}
    for r in report["results"]:
        index = r["event"]["task"]["index"]
        needs_work = not golden[index]["db_unchanged"] or bool(golden[index]["outputs"])
        assert (r["verdict"]["status"] == "fail") == needs_work, (index, r["verdict"])


def test_trials_and_pass_hat_k(runner, tmp_path):
    report = run_tasks(runner, tmp_path, "airline", "test", "{use: tau-oracle}", trials=3)
    assert report["totals"]["events"] == 150 and report["pass_hat_k"] == {"1": 1.0, "2": 1.0, "3": 1.0}


def test_pass_hat_k_is_the_unbiased_estimator():
    def result(index, trial, passed):
        spec = EventSpec(id=f"T{index}-{trial}", policies=["P1"], target_complexity=3, complexity=3)
        event = Event(id=spec.id, spec=spec, task={"index": index, "trial": trial})
        return EventResult(event=event, verdict=Verdict(event_id=spec.id, status="pass" if passed else "fail"))

    outcomes = {0: [True, True, False, True], 1: [False, False, True, False]}
    results = [result(i, t, p) for i, trials in outcomes.items() for t, p in enumerate(trials)]
    expected = {k: (math.comb(3, k) / math.comb(4, k) + math.comb(1, k) / math.comb(4, k)) / 2
                for k in (1, 2, 3, 4)}
    assert pass_hat_k(results) == {k: round(v, 4) for k, v in expected.items()}
    assert pass_hat_k(results)[1] == 0.5 and pass_hat_k(results)[4] == 0.0
