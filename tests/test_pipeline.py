"""The IntellAgent pipeline end to end on the mock model and over HTTP; resuming; swapping steps;
checking pipelines before any model call; stopping early; re-rendering reports."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent.testing.openai_server import OpenAIServer
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

PIPELINE = REPO / "plugins" / "intellagent" / "pipeline.yaml"


def run_cli(runner, *args, **kwargs):
    return runner.invoke(cli, ["run", *args], **kwargs)


def load_report(workspace: Path) -> dict:
    path = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)[-1]
    return read_report(path)


def comparable(report: dict) -> dict:
    """The report without what legitimately differs between two runs (run id, cost rows, which
    earlier run an item was reused from)."""
    out = {k: v for k, v in report.items() if k not in ("info", "cost")}
    out["info"] = {k: v for k, v in report["info"].items() if k not in ("run_id", "reused")}
    return out


def items(report: dict, step: str) -> list[dict]:
    return [i for i in report["items"] if i["step"] == step]


@pytest.mark.parametrize("env", ["airline", "retail", "education"])
def test_offline_run_completes_with_a_report(env, runner, tmp_path):
    result = run_cli(runner, env, "--events", "30", "--model", "mock/schema",
                     "--workspace", str(tmp_path))
    assert result.exit_code == 0, result.output + str(result.exception)
    html = [l for l in result.stdout.splitlines() if l.startswith("report: ") and l.endswith(".html")]
    assert html and Path(html[0][8:]).is_file()
    report = load_report(tmp_path)
    assert sum(report["outcomes"].values()) == 30
    assert len(items(report, "events")) == 30
    verdicts = items(report, "verdicts")
    scored = [v for v in verdicts if v["status"] in ("pass", "fail", "agent-error")]
    assert scored and report["metrics"]["success"]["values"]["n"] == len(scored)
    assert report["metrics"]["success"]["values"]["passed"] == sum(v["status"] == "pass" for v in scored)
    events = {i["item"]: i for i in items(report, "events")}
    for v in verdicts:
        assert v["status"] in ("pass", "fail", "not-exercised", "agent-error", "infra-error", "simulator-error")
        assert events[v["item"]]["status"] == "ok"  # invalid events are never simulated
    for d in items(report, "dialogs"):
        assert d["value"]["turns"]
    assert 0 < report["metrics"]["coverage"]["values"]["policies"] <= 1
    for row in report["metrics"]["policies"]["rows"]:
        assert row["violated"] <= row["exercised"] <= row["targeted"]
    assert (tmp_path / "runs").is_dir() and "verdicts" in result.stderr
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["events"]["items"] == 30 and steps["verdicts"]["each"] == "dialogs"


def test_same_seed_same_report_and_a_rerun_makes_no_model_call(runner, tmp_path):
    first = tmp_path / "a"
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(first)).exit_code == 0
    calls_before = _calls(first)
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(first)).exit_code == 0
    assert _calls(first)[len(calls_before):] == []  # every item was reused: not even a cache lookup
    other = tmp_path / "b"
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(other)).exit_code == 0
    reports = [comparable(read_report(p)) for p in sorted(first.glob("runs/*/report.json"))]
    assert reports[0] == reports[1] == comparable(load_report(other))
    changed = tmp_path / "c"
    assert run_cli(runner, "airline", "--events", "12", "--seed", "5", "--workspace", str(changed)).exit_code == 0
    assert comparable(load_report(changed))["items"] != reports[0]["items"]


def _calls(workspace: Path) -> list[tuple]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return conn.execute("SELECT request_hash, cached FROM llm_calls ORDER BY id").fetchall()


def _finished(workspace: Path) -> dict[str, int]:
    """Finished items in the store, by the plugin that made them."""
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return dict(conn.execute("SELECT step, COUNT(*) FROM items WHERE key NOT LIKE '%~%' "
                                 "GROUP BY step").fetchall())


def kill_when(args: list[str], workspace: Path, ready, env: dict) -> None:
    """Start ``args``, SIGKILL it once ``ready(finished items)`` holds."""
    proc = subprocess.Popen(args + ["--workspace", str(workspace)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (workspace / "intellagent.db").exists():
            try:
                if ready(_finished(workspace)):
                    break
            except sqlite3.OperationalError:
                pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow  # kills a run in a subprocess
def test_killed_run_resumes_to_the_same_report(tmp_path):
    """Kill a run half-way (SIGKILL), run it again: it finishes without redoing finished items or
    repeating model calls, and its report equals an uninterrupted run's."""
    reference = tmp_path / "reference"
    # 60 events: enough work left after the kill condition holds that the kill lands mid-run
    # even on a loaded machine (items are committed a quarter of a second apart)
    args = [sys.executable, "-m", "intellagent", "run", "retail", "--events", "60"]
    # different hash seeds: the result must not depend on set or dict-of-str iteration order
    done = subprocess.run(args + ["--workspace", str(reference)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONHASHSEED="1"))
    assert done.returncode == 0, done.stderr

    workspace = tmp_path / "killed"
    kill_when(args, workspace, lambda f: f.get("intellagent/policy-user", 0) >= 5,
              dict(os.environ, PYTHONHASHSEED="2"))
    partial = _finished(workspace)
    assert partial.get("intellagent/policy-critic", 0) < 60

    resumed = subprocess.run(args + ["--workspace", str(workspace)], capture_output=True,
                             text=True, timeout=300, env=dict(os.environ, PYTHONHASHSEED="3"))
    assert resumed.returncode == 0, resumed.stderr
    assert _finished(workspace) == _finished(reference)
    made = [h for h, cached in _calls(workspace) if not cached]
    assert len(made) == len(set(made)), "a model call was repeated"
    assert comparable(load_report(workspace)) == comparable(load_report(reference))


def test_swapping_a_step_is_one_line_of_yaml(runner, tmp_path):
    swapped = tmp_path / "uniform.yaml"
    swapped.write_text(PIPELINE.read_text().replace("{use: weighted-walk,", "{use: uniform-walk,"))
    assert runner.invoke(cli, ["validate", str(swapped)]).output.startswith("ok: pipeline uniform")
    result = run_cli(runner, "education", "--pipeline", str(swapped), "--events", "10",
                     "--workspace", str(tmp_path / "ws"))
    assert result.exit_code == 0, result.output
    steps = {s["name"]: s["use"] for s in load_report(tmp_path / "ws")["steps"]}
    assert steps["specs"] == "intellagent/uniform-walk"


@pytest.mark.parametrize("old,new,message", [
    ("{use: weighted-walk,", "{use: policy-graph,",
     "steps.specs.with: unknown key 'events' (options of intellagent/policy-graph)"),
    ("{use: weighted-walk,", "{use: no-such-walk,", "steps.specs.use: no stage named 'no-such-walk'"),
    ("with: {events: 30, complexity: [2, 11]}", "with: {events: 30, complexity: [2, 11], colour: red}",
     "steps.specs.with: unknown key 'colour' (options of intellagent/weighted-walk)"),
    ("{use: openai-tools}", "{use: telepathy}", "agent.use: no agent named 'telepathy'"),
    ("report: [html, json, csv]", "report: [html, pdf]", "report[1].use: no reporter named 'pdf'"),
    ("report: [html, json, csv]", "report: [html, weighted-walk]",
     "report[1].use: 'weighted-walk' is a sampler, not a reporter"),
    ("verdicts: {use: policy-critic, each: dialogs, from: events}", "verdicts: {use: policy-critic, each: dialogs}",
     "input 'event' (Event) of 'intellagent/policy-critic' is not wired: add it to from: (steps giving Event: events)"),
    ("each: dialogs, from: events}", "each: dialogs, from: chats}", "steps.verdicts.from: no step named 'chats'"),
    ("events: {use: symbolic-events, each: specs, from: graph}", "events: {use: symbolic-events, each: graph}",
     "steps.events.each: 'graph' runs once and gives one PolicyGraph"),
    ("{use: policy-graph}", "{use: policy-graph, from: verdicts}", "steps depend on each other in a circle"),
    ("default: {model: mock/schema}", "default: {model: mock/schema}\n  roles: {judge: {model: x}}",
     "llm.roles.judge: no step of this pipeline uses a model role 'judge'"),
    ("policies: {use: policies}", "policies: {use: policies, with: {graph: specs}}",
     "metrics.policies: step 'specs' gives list[EventSpec], not PolicyGraph"),
])
def test_validate_rejects_a_broken_pipeline(old, new, message, runner, tmp_path):
    text = PIPELINE.read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new))
    result = runner.invoke(cli, ["validate", str(bad)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "bad.yaml:" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_old_format_pipeline_says_how_to_write_it_now(runner, tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("stages:\n  extractor: {use: policy-graph}\n  sampler: {use: weighted-walk}\n")
    result = runner.invoke(cli, ["validate", str(old)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {old}:1: this is the old pipeline format")
    assert "steps:" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_step_that_does_not_fit_is_rejected(runner, tmp_path):
    import types

    from pydantic import BaseModel

    from intellagent import hookimpl
    from intellagent.steps import Generator

    class Blueprint(BaseModel):
        steps: list[str]

    class BlueprintGenerator(Generator):
        name = "from-blueprints"
        inputs = {"blueprint": Blueprint}
        output = Blueprint

    plugin = types.ModuleType("blueprints")
    plugin.register_stages = hookimpl(lambda register: register(BlueprintGenerator))
    bad = tmp_path / "p.yaml"
    bad.write_text(PIPELINE.read_text().replace("{use: symbolic-events, each: specs, from: graph}",
                                                "{use: blueprints/from-blueprints, each: specs}"))
    result = runner.invoke(cli, ["validate", str(bad)], obj={"plugins": (plugin,)})
    assert result.exit_code == 2
    assert ("steps.events.each: 'specs' gives EventSpec, which no input of "
            "'blueprints/from-blueprints' takes (inputs: blueprint: Blueprint)") in result.stderr


def test_a_steps_options_the_environment_cannot_serve_are_refused_before_anything_runs(runner, tmp_path):
    """Step.check(env): a step's options checked against the environment of the run, in one
    line naming the step, at `validate ENV --pipeline` and before a run's first item."""
    import types

    from intellagent import hookimpl
    from intellagent.steps import Extractor
    from intellagent_plugins.intellagent.extractor import PolicyGraphExtractor

    class PickyGraph(PolicyGraphExtractor):
        name = "picky-graph"

        def check(self, env):
            return None if "book_reservation" in env.tools else f"{env.name} has no book_reservation tool"

    assert Extractor.check(PolicyGraphExtractor(PolicyGraphExtractor.Config()), None) is None  # the default
    plugin = types.ModuleType("picky")
    plugin.register_stages = hookimpl(lambda register: register(PickyGraph))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.read_text().replace("graph: {use: policy-graph}", "graph: {use: picky/picky-graph}"))
    result = runner.invoke(cli, ["validate", "education", "--pipeline", str(pipeline)], obj={"plugins": (plugin,)})
    assert result.exit_code == 2 and result.stderr == f"error: {pipeline}:8: steps.graph.with: education has no book_reservation tool\n"
    result = run_cli(runner, "education", "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws"),
                     obj={"plugins": (plugin,)})
    assert result.exit_code == 2 and result.stderr == f"error: {pipeline}:8: steps.graph.with: education has no book_reservation tool\n"
    assert not list((tmp_path / "ws").glob("runs/*"))  # no run was started
    result = run_cli(runner, "airline", "--pipeline", str(pipeline), "--events", "2", "--workspace", str(tmp_path / "ok"),
                     obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output


def test_flag_errors_name_the_flag_not_the_file(runner, tmp_path):
    result = run_cli(runner, "education", "--events", "many", "--workspace", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --events: steps.specs.with.events:"), result.stderr
    result = run_cli(runner, "education", "--colour", "red", "--workspace", str(tmp_path))
    assert result.exit_code == 2 and "--colour: no such option (this pipeline's parameters: --events)" in result.stderr
    result = run_cli(runner, "education", "--set", "steps.dialogs.with.max_turns=0",
                     "--workspace", str(tmp_path))
    assert result.exit_code == 2 and result.stderr.startswith(
        "error: --set steps.dialogs.with.max_turns: steps.dialogs.with.max_turns:"), result.stderr


def test_run_against_the_local_server_over_http(runner, tmp_path):
    with OpenAIServer() as server:
        pipeline = tmp_path / "http.yaml"
        pipeline.write_text(PIPELINE.read_text().replace(
            "default: {model: mock/schema}", f"default: {{model: gpt-4o-mini, base_url: '{server.base_url}'}}"))
        result = run_cli(runner, "airline", "--pipeline", str(pipeline), "--events", "30",
                         "--workspace", str(tmp_path / "ws"))
        assert result.exit_code == 0, result.output
        assert len(server.requests) > 20
        roles = {c.split("|")[0] for c in _roles(tmp_path / "ws")}
        report = load_report(tmp_path / "ws")
        expected = {"extractor", "generator", "user", "agent", "critic"}
        graph = items(report, "graph")[0]["value"]
        if len(graph["policies"]) > 1:
            expected.add("edges")
        assert expected <= roles
        assert sum(report["outcomes"].values()) == 30
        assert items(report, "dialogs")
        assert report["info"]["models"]["agent"] == "gpt-4o-mini"


def _roles(workspace: Path) -> list[str]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return [f"{r}|{m}" for r, m in conn.execute("SELECT role, model FROM llm_calls")]


def test_until_stops_after_a_step_and_the_rest_builds_on_it(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    events = run_cli(runner, "airline", "--events", "8", "--until", "events", *ws)
    assert events.exit_code == 0, events.output
    assert "stopped after step events" in events.stdout and "events: 8 items" in events.stdout
    assert "intellagent/policy-user" not in _finished(tmp_path)
    assert not list(tmp_path.glob("runs/*/report.html"))

    calls_before = len(_calls(tmp_path))
    dialogs = run_cli(runner, "airline", "--events", "8", "--until", "dialogs", *ws)
    assert dialogs.exit_code == 0 and "intellagent/policy-critic" not in _finished(tmp_path)
    new_roles = {r for r, in sqlite3.connect(tmp_path / "intellagent.db").execute(
        "SELECT DISTINCT role FROM llm_calls WHERE id > ?", (calls_before,))}
    assert new_roles <= {"user", "agent", "critic"}  # events were reused, not remade

    calls_before = len(_calls(tmp_path))
    full = run_cli(runner, "airline", "--events", "8", *ws)
    assert full.exit_code == 0
    new_roles = {r for r, in sqlite3.connect(tmp_path / "intellagent.db").execute(
        "SELECT DISTINCT role FROM llm_calls WHERE id > ?", (calls_before,))}
    assert new_roles <= {"critic"}

    calls_before = len(_calls(tmp_path))
    graph = runner.invoke(cli, ["graph", "airline", *ws])
    assert graph.exit_code == 0 and graph.stdout.startswith("task: ")
    assert len(_calls(tmp_path)) == calls_before  # the stored graph, not a new one


def test_report_is_rewritten_from_the_store(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    assert run_cli(runner, "education", "--events", "6", *ws).exit_code == 0
    first = load_report(tmp_path)
    again = runner.invoke(cli, ["report", "latest", "--format", "csv,json", *ws])
    assert again.exit_code == 0, again.output
    lines = again.stdout.strip().splitlines()
    assert lines[0].endswith("report.csv") and lines[1].endswith("report.json")
    assert comparable(read_report(Path(lines[1][8:]))) == comparable(first)
    rows = Path(lines[0][8:]).read_text().splitlines()
    assert rows[0] == "step,item,status,note,score,score_status,score_value,labels,score_note"
    assert sum(1 for r in rows if r.startswith("verdicts,")) >= 6


def test_a_run_whose_graph_cannot_be_made_ends_cleanly_and_says_so(runner, tmp_path):
    """Every extraction call fails validation: the graph is an infra error, nothing downstream
    runs, the reports are written, and the command says the item can be retried."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.read_text().replace(
        "default: {model: mock/schema}",
        "default: {model: mock/schema}\n  roles: {extractor: {model: mock/scripted, options: {replies: []}}}"))
    result = run_cli(runner, "education", "--pipeline", str(pipeline), "--events", "3",
                     "--workspace", str(tmp_path / "ws"))
    assert result.exit_code == 3, result.output  # the run could not finish
    assert "1 item(s) could not finish" in result.stdout and "run the same command again" in result.stdout
    report = load_report(tmp_path / "ws")
    graph = items(report, "graph")[0]
    assert graph["status"] == "infra-error" and "could not be extracted" in graph["note"]
    assert not items(report, "events") and report["metrics"]["coverage"]["values"]["policies"] == 0.0


def test_the_seed_database_is_built_once_and_off_the_event_loop_when_nothing_checked_it(runner, tmp_path,
                                                                                        monkeypatch):
    import asyncio
    import threading

    from intellagent.environment import load_environment, loader
    from intellagent.plan import load_plan
    from intellagent.registry import load_registry
    from intellagent.runner import run_plan
    from intellagent.store import Store

    builds = []
    real = loader.build_seed_database

    def watched(env):  # the real build, noting which thread runs it
        builds.append("main" if threading.current_thread() is threading.main_thread() else "thread")
        return real(env)

    monkeypatch.setattr(loader, "build_seed_database", watched)
    # the command checks the environment first: that build is the one the run copies
    result = run_cli(runner, "airline", "--events", "4", "--workspace", str(tmp_path / "cli"))
    assert result.exit_code == 0, result.output
    assert builds == ["main"] and len(items(load_report(tmp_path / "cli"), "events")) == 4
    # through the API, unchecked: built on a worker thread while the graph's calls are in flight
    builds.clear()
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    plan = load_plan(None, registry, params={"events": "4"})
    ws = tmp_path / "api"
    report = asyncio.run(run_plan(plan, env, store=Store.for_workspace(ws), registry=registry,
                                  workspace=ws, progress_stream=open(os.devnull, "w"))).report
    assert builds == ["thread"] and sum(report.outcomes.values()) == 4
