"""τ-bench tasks inside IntellAgent: the oracle agent passes every task; an agent that does
nothing fails exactly the tasks that need a change or an answer; pass^k is the unbiased
estimator."""

from __future__ import annotations

import json
import math

import pytest

from intellagent.cli import cli
from intellagent.metrics import pass_hat_k
from tests.conftest import TAU_BENCH
from intellagent_plugins.reporters.writers import read_report

pytestmark = pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")


def idle_agent(messages, tools):
    return "I cannot help with that."


def run_tasks(runner, tmp_path, domain, split, agent, *extra, trials=1):
    ws = tmp_path / f"ws-{domain}-{split}"
    result = runner.invoke(cli, ["run", domain, "--pipeline", "tau-bench", "--data", str(TAU_BENCH / domain),
                                 "--tasks", f"tasks_{split}.json", "--trials", str(trials),
                                 "--agent", agent, "--workspace", str(ws), *extra])
    assert result.exit_code == 0, result.output + str(result.exception)
    return read_report(next(ws.glob("runs/*/report.json")))


@pytest.mark.parametrize("domain,split,count", [("airline", "test", 50), ("retail", "test", 115),
                                                ("retail", "dev", 20)])
def test_oracle_agent_passes_every_task(runner, tmp_path, domain, split, count):
    report = run_tasks(runner, tmp_path, domain, split, "tau-oracle")
    assert report["outcomes"] == {"pass": count}
    assert report["metrics"]["pass-hat-k"]["values"] == {"pass^1": 1.0}


def test_an_idle_agent_fails_the_tasks_that_need_work(runner, tmp_path):
    report = run_tasks(runner, tmp_path, "retail", "dev", "python",
                       "--set", "agent.with.callable=tests.test_tau_runner:idle_agent")
    golden = {t["task"]: t for t in json.loads((TAU_BENCH / "retail" / "golden_dev.json").read_text())["tasks"]}
    verdicts = [i for i in report["items"] if i["step"] == "verdicts"]
    assert len(verdicts) == 20
    for v in verdicts:
        [score] = v["scores"]
        index = score["labels"]["task"]
        needs_work = not golden[index]["db_unchanged"] or bool(golden[index]["outputs"])
        assert (v["status"] == "fail") == needs_work, (index, v)


def test_a_state_check_without_final_hashes_is_a_configuration_error(runner, tmp_path):
    """The simulator hashes the final database only when asked (`final_hash`); τ-bench's state
    check on dialogs without one stops with one line saying so, not a failed task per dialog."""
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "retail"),
                                 "--tasks", "tasks_dev.json", "--agent", "tau-oracle", "--workspace", str(ws),
                                 "--set", "steps.dialogs.with.final_hash=false"])
    assert result.exit_code == 2, result.output
    assert "set `final_hash: true` on the simulator step" in result.output
    assert "Traceback" not in result.output


def crashing_agent(messages, tools):
    raise RuntimeError("agent bug")


def test_a_crashing_agent_fails_every_task_as_agent_error(runner, tmp_path):
    """Even the tasks an idle agent passes (nothing to change, nothing to say): a crash is the
    agent's failure, never a pass and never an infra error."""
    report = run_tasks(runner, tmp_path, "retail", "dev", "python",
                       "--set", "agent.with.callable=tests.test_tau_runner:crashing_agent")
    golden = json.loads((TAU_BENCH / "retail" / "golden_dev.json").read_text())["tasks"]
    assert any(t["db_unchanged"] and not t["outputs"] for t in golden)  # the tasks that used to pass
    verdicts = [i for i in report["items"] if i["step"] == "verdicts"]
    assert len(verdicts) == 20 and {v["status"] for v in verdicts} == {"agent-error"}
    assert all("RuntimeError: agent bug" in v["note"] for v in verdicts)
    assert report["metrics"]["success"]["values"]["rate"] == 0.0
    assert report["metrics"]["success"]["values"]["n"] == 20
    assert report["metrics"]["pass-hat-k"]["values"] == {"pass^1": 0.0}


def test_trials_and_pass_hat_k(runner, tmp_path):
    report = run_tasks(runner, tmp_path, "airline", "test", "tau-oracle", trials=3)
    assert sum(report["outcomes"].values()) == 150
    assert report["metrics"]["pass-hat-k"]["values"] == {"pass^1": 1.0, "pass^2": 1.0, "pass^3": 1.0}


def test_pass_hat_k_is_the_unbiased_estimator():
    outcomes = [[True, True, False, True], [False, False, True, False]]
    expected = {k: (math.comb(3, k) / math.comb(4, k) + math.comb(1, k) / math.comb(4, k)) / 2
                for k in (1, 2, 3, 4)}
    assert pass_hat_k(outcomes) == {k: round(v, 4) for k, v in expected.items()}
    assert pass_hat_k(outcomes)[1] == 0.5 and pass_hat_k(outcomes)[4] == 0.0


def prompt_recorder(messages, tools):
    import os

    with open(os.environ["PROMPT_LOG"], "a") as fh:
        fh.write(json.dumps(messages[0]["content"]) + "\n")
    return "Let me look into it."


def test_tau_runs_use_tau_benchs_own_policy_text(runner, tmp_path, monkeypatch):
    log = tmp_path / "prompts.jsonl"
    monkeypatch.setenv("PROMPT_LOG", str(log))
    policy = TAU_BENCH / "retail" / "policy.md"
    run_tasks(runner, tmp_path, "retail", "dev", "python", "--prompt", str(policy),
              "--set", "agent.with.callable=tests.test_tau_runner:prompt_recorder",
              "--set", "steps.tasks.with.indices=[0, 1]")
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert seen and set(seen) == {policy.read_text()}


def test_trials_of_a_task_are_draws_of_their_own_not_replays_of_the_first(runner, tmp_path, openai_server):
    """Every role on a cached model at 127.0.0.1: each trial asks its own questions (its own cache
    entries and seed), so pass^k measures consistency; a rerun still reuses every answer."""
    def run():
        return run_tasks(runner, tmp_path, "retail", "dev", "openai-tools", "--set", "steps.tasks.with.indices=[0]",
                         "--set", f"llm.default={{model: m, base_url: '{openai_server.base_url}'}}",
                         "--set", "steps.dialogs.with.max_turns=3", trials=3)
    report = run()
    requests = [r for r in openai_server.requests if r.get("seed") is not None]  # not the mode probe
    seeds = {r["seed"] for r in requests}
    opening = [r for r in requests if r["messages"] == requests[0]["messages"]]
    assert len(seeds) == 3  # a seed per trial: a model that honours seeds samples each afresh
    assert len(opening) == 3  # the user's first turn, asked once per trial, not once and replayed
    assert sum(1 for i in report["items"] if i["step"] == "dialogs") == 3
    sent = len(openai_server.requests)
    run()
    assert len(openai_server.requests) == sent  # the rerun made no call: every answer was cached
