"""Honest resume accounting and several processes on one workspace: a run's cost is every call
its results took, across resumes; a killed run is not left 'running'; a budget stop is its own
status and resumes; the stored config names the models really used; two processes running the
same command on one workspace finish with the same report as one, paying for (almost) nothing
twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import asyncio

import pytest

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.plan import load_plan
from intellagent.registry import load_registry
from intellagent.items import ItemMaker
from intellagent.store import HOST, Store
from intellagent_plugins.reporters.writers import read_report

PRICED = ["--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}"]


def run_args(events: int = 24) -> list[str]:
    return [sys.executable, "-m", "intellagent", "run", "retail", "--events", str(events), *PRICED]


def report_of(workspace: Path) -> dict:
    path = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)[-1]
    return read_report(path)


def comparable(report: dict) -> dict:
    return {"metrics": report["metrics"], "items": report["items"], "outcomes": report["outcomes"]}


def totals(cost_rows: list[dict]) -> tuple[int, float]:
    made = sum(r["calls"] - r["cached"] for r in cost_rows)
    return made, round(sum(r["cost_usd"] for r in cost_rows), 6)


def finished(workspace: Path) -> int:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return conn.execute("SELECT COUNT(*) FROM items WHERE step = 'intellagent/policy-user'").fetchone()[0]


@pytest.mark.slow  # kills a run in a subprocess
def test_a_resumed_runs_cost_is_every_call_its_results_took(tmp_path):
    args = run_args()
    reference = tmp_path / "reference"
    assert subprocess.run(args + ["--workspace", str(reference)], capture_output=True, timeout=300).returncode == 0
    ws = tmp_path / "killed"
    proc = subprocess.Popen(args + ["--workspace", str(ws)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if (ws / "intellagent.db").exists() and finished(ws) >= 6:
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = Store.for_workspace(ws).resolve_run("latest")  # looking at the runs reaps dead ones
    with sqlite3.connect(ws / "intellagent.db") as conn:  # not left 'running' forever
        assert conn.execute("SELECT status FROM runs WHERE id = ?", (killed,)).fetchone()[0] == "interrupted"

    resumed = subprocess.run(args + ["--workspace", str(ws)], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    a, b = report_of(reference), report_of(ws)
    assert comparable(a) == comparable(b)
    # the report's cost, and `intellagent cost`, count the calls made before the kill too
    assert totals(b["cost"]) == totals(a["cost"]) and totals(a["cost"])[1] > 0
    here = Store.for_workspace(ws).cost_summary(b["info"]["run_id"], made_here=True)
    assert totals(here)[0] < totals(b["cost"])[0]  # this process alone paid for less
    with sqlite3.connect(ws / "intellagent.db") as conn:
        made = [h for h, in conn.execute("SELECT request_hash FROM llm_calls WHERE cached = 0")]
    assert len(made) == len(set(made)), "an answer paid for before the kill was paid again"


def held_agent(messages, tools):
    """The agent of the interrupt test: while the test holds it (INTELLAGENT_TEST_HOLD names a
    file), it says it was called, by that file, and takes 2 s a turn: the signal comes while
    the run is in its dialogs, and nothing waits long for a turn left answering."""
    hold = os.environ.get("INTELLAGENT_TEST_HOLD")
    if hold:
        Path(hold).touch()
        time.sleep(2)
    return "Done."


@pytest.mark.slow  # interrupts a run in a subprocess
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_is_an_unfinished_run_not_a_failed_gate(tmp_path, sent):
    """Ctrl-C printed 'Aborted!' and exited 1, which says a gate failed, and left the run
    'failed'; it is exit 3 (the run could not finish) with one line, the run 'interrupted', and
    the same command again finishes it. A SIGTERM (a cancelled CI job) killed the process with
    143 and left the run 'running': it ends the same way. The signal comes while the agent is
    answering (held by the test: a run left to itself can finish before any signal)."""
    ws, held = tmp_path / "ws", tmp_path / "held"
    args = [*run_args(), "--agent", "python", "--set", "agent.with.callable=tests.test_resume_and_concurrency:held_agent",
            "--set", "agent.with.version=held", "--workspace", str(ws)]
    # Ctrl-C as a terminal sends it, whatever this process inherited: a job started in the
    # background of a script (`cmd &`, as CI may be) ignores SIGINT, and so would the run
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "INTELLAGENT_TEST_HOLD": str(held)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not held.exists():
        time.sleep(0.01)
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert err.strip().splitlines() == ["error: interrupted: run the same command again to go on where it stopped"]
    with sqlite3.connect(ws / "intellagent.db") as conn:
        assert [s for s, in conn.execute("SELECT status FROM runs")] == ["interrupted"]
    resumed = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert resumed.returncode in (0, 1), resumed.stderr  # finished (its verdicts may fail it: no gate)
    assert finished(ws) == 24


def test_a_budget_stop_is_its_own_status_and_resumes(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    stopped = runner.invoke(cli, ["run", "airline", "--events", "10", "--budget", "1.0", *PRICED, *ws])
    assert stopped.exit_code == 3, stopped.output  # the run could not finish
    assert "run status: budget-exhausted" in stopped.stdout
    report = report_of(tmp_path)
    statuses = {i["status"] for i in report["items"]}
    assert "budget-exhausted" in statuses and "infra-error" not in statuses
    assert report["info"]["status"] == "budget-exhausted"
    folders = list(tmp_path.glob("runs/*"))
    resumed = runner.invoke(cli, ["run", "airline", "--events", "10", "--budget", "1000", *PRICED, *ws])
    assert resumed.exit_code == 0 and "run status" not in resumed.stdout
    assert "budget-exhausted" not in {i["status"] for i in report_of(tmp_path)["items"]}
    # the resumed run rewrote the stopped run's report folder instead of writing a new one
    assert list(tmp_path.glob("runs/*")) == folders
    assert report_of(tmp_path)["info"]["status"] == "done"
    again = runner.invoke(cli, ["run", "airline", "--events", "10", "--budget", "1000", *PRICED, *ws])
    assert again.exit_code == 0  # the run is complete now: running it again is a run of its own
    assert len(list(tmp_path.glob("runs/*"))) == 2


def test_a_resumed_run_writes_a_new_folder_only_when_asked(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    args = ["run", "airline", "--events", "4", "--budget", "0.5", *PRICED, *ws]
    assert runner.invoke(cli, args).exit_code == 3  # stopped by the budget: could not finish
    assert runner.invoke(cli, args).exit_code == 3  # still stopped by the budget: same folder
    assert len(list(tmp_path.glob("runs/*"))) == 1
    # a run of its own: it reuses what the stopped runs made, and its own budget stops it again
    assert runner.invoke(cli, args + ["--new-report"]).exit_code == 3
    assert len(list(tmp_path.glob("runs/*"))) == 2
    with sqlite3.connect(tmp_path / "intellagent.db") as conn:
        runs = [(i, json.loads(c)) for i, c in conn.execute("SELECT id, config FROM runs ORDER BY created_at")]
    (first, _), (_, second), (_, third) = runs
    assert second["resumes"] == first and second["report_folder"] == first
    assert third["resumes"] is None and third["report_folder"] is None


def test_the_stored_config_names_the_models_really_used(runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    text = (Path(__file__).resolve().parent.parent / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    pipeline.write_text(text.replace("default: {model: mock/schema}",
                                     "default: {model: mock/scripted}\n  roles: {critic: {model: mock/scripted}}"))
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                 "--model", "mock/schema", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    store = Store.for_workspace(tmp_path / "ws")
    config = store.run_config(store.resolve_run("latest"))
    assert config["spec"]["llm"]["default"]["model"] == "mock/schema"
    assert config["spec"]["llm"]["roles"]["critic"]["model"] == "mock/schema"
    assert set(report_of(tmp_path / "ws")["info"]["models"].values()) == {"mock/schema"}


@pytest.mark.slow  # two processes
def test_two_processes_on_one_workspace(tmp_path):
    reference = tmp_path / "one"
    assert subprocess.run(run_args() + ["--workspace", str(reference)], capture_output=True, timeout=300).returncode == 0
    shared = tmp_path / "two"
    procs = [subprocess.Popen(run_args() + ["--workspace", str(shared)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONHASHSEED=str(i))) for i in (1, 2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err
    reports = [read_report(p) for p in shared.glob("runs/*/report.json")]
    assert len(reports) == 2
    expected = comparable(report_of(reference))
    assert all(comparable(r) == expected for r in reports)
    with sqlite3.connect(shared / "intellagent.db") as conn:
        made = [h for h, in conn.execute("SELECT request_hash FROM llm_calls WHERE cached = 0")]
    duplicated = len(made) - len(set(made))
    assert duplicated <= 5, f"{duplicated} of {len(made)} calls paid twice"
    with sqlite3.connect(reference / "intellagent.db") as conn:
        alone = conn.execute("SELECT COUNT(*) FROM llm_calls WHERE cached = 0").fetchone()[0]
    assert len(set(made)) == alone


def test_a_process_waiting_for_an_item_another_holds_commits_what_it_finished_first(tmp_path, monkeypatch):
    """Two processes deadlocked when each waited for an item the other had finished but only
    buffered: a waiting process never wrote, so it never committed. While it waits, what it
    finished must be in the store for the other to see."""
    monkeypatch.setattr(Store, "FLUSH_SECONDS", 3600.0)  # only an explicit flush commits
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "retail").value)
    plan = load_plan(None, registry, params={"events": "2"})
    ours = Store.for_workspace(tmp_path)
    theirs = Store(ours.url)  # another process's connection to the same store
    maker = ItemMaker(plan, env, store=ours, llm=LLM(plan.spec.llm, store=ours, registry=registry),
                      seed=0, run_id="ours", owner=f"{HOST}:{os.getpid()}:ours",
                      on_error=lambda step, exc: None)
    assert theirs.claim("theirs", f"{HOST}:{os.getpid()}:theirs", 60.0)  # alive: this very process
    ours.flush()
    ours.put_item(key="mine", step="s", status="ok", halt=False, note="", scores="{}", payload="{}",
                  value_hash="h")
    assert theirs.item("mine") is None  # buffered

    async def wait_a_little() -> None:
        step = next(iter(plan.steps.values()))
        waiting = asyncio.ensure_future(maker._claimed(step, None, "theirs", {}, None))
        await asyncio.sleep(0.5)  # a few looks at the claimed item
        assert not waiting.done()  # still held by the other
        waiting.cancel()

    asyncio.run(wait_a_little())
    assert theirs.item("mine") is not None, "the waiting process kept what it finished to itself"


def test_a_degraded_item_serves_the_run_that_made_it_and_is_made_again_by_the_next(tmp_path):
    """A degraded item (made without a model call that failed) goes on to the rest of its run,
    the run's other processes included, but a later run makes it again; its new version replaces
    it in the store."""
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "retail").value)
    plan = load_plan(None, registry, params={"events": "2"})
    store = Store.for_workspace(tmp_path)
    step = plan.steps["graph"]
    payload = json.dumps({"environment": "retail", "task": "t", "flows": ["f"], "policies": []})

    def maker(run_id: str) -> ItemMaker:
        return ItemMaker(plan, env, store=store, llm=LLM(plan.spec.llm, store=store, registry=registry),
                         seed=0, run_id=run_id, owner=f"{HOST}:{os.getpid()}:{run_id}",
                         on_error=lambda s, exc: None)

    store.put_item(key="g", step="intellagent/policy-graph", status="degraded", halt=False,
                   note="2 pair(s) of policies could not be scored", scores="[]", payload=payload,
                   value_hash="h1", run_id="first")
    store.flush()
    assert maker("first").stored(step, "g").status == "degraded"  # its own run: reused
    assert Store(store.url).item("g").run_id == "first"  # another process of that run sees whose it is
    assert maker("second").stored(step, "g") is None  # the next run makes it again
    store.put_item(key="g", step="intellagent/policy-graph", status="ok", halt=False, note="",
                   scores="[]", payload=payload, value_hash="h2", run_id="second")
    store.flush()
    assert Store(store.url).item("g").status == "ok" and maker("third").stored(step, "g").hash == "h2"
