"""The pipeline end to end on the mock model and over HTTP; resuming; swapping stages; checking
pipelines before any model call."""

from __future__ import annotations

import json
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


def run_cli(runner, *args):
    return runner.invoke(cli, ["run", *args])


def load_report(workspace: Path) -> dict:
    [path] = sorted(workspace.glob("runs/*/report.json"))[-1:]
    return json.loads(path.read_text())


def comparable(report: dict) -> dict:
    """The report without what legitimately differs between two runs (run id, cost rows)."""
    return {k: v for k, v in report.items() if k not in ("run_id", "cost")}


@pytest.mark.parametrize("env", ["airline", "retail", "education"])
def test_offline_run_completes_with_a_report(env, runner, tmp_path):
    result = run_cli(runner, env, "--events", "30", "--model", "mock/schema",
                     "--workspace", str(tmp_path))
    assert result.exit_code == 0, result.output + str(result.exception)
    html = [l for l in result.stdout.splitlines() if l.startswith("report: ") and l.endswith(".html")]
    assert html and Path(html[0][8:]).is_file()
    report = load_report(tmp_path)
    totals = report["totals"]
    assert totals["events"] == 30 == len(report["results"])
    assert sum(v for k, v in totals.items() if k != "events") == 30
    scored = totals.get("pass", 0) + totals.get("fail", 0)
    assert scored > 0 and report["success"]["n"] == scored
    for r in report["results"]:
        if r["event"]["status"] == "ok":
            assert r["dialog"]["turns"] and r["verdict"]["status"] in (
                "pass", "fail", "infra-error", "simulator-error")
    assert 0 < report["policy_coverage"] <= 1
    for p in report["policies"]:
        assert p["violated"] <= p["exercised"] <= p["in_events"]
        assert p["violation_rate"] is None or 0 <= p["violation_rate"] <= 1
    assert (tmp_path / "runs").is_dir() and "extract" in result.stderr


def test_same_seed_same_report_and_a_rerun_makes_no_model_call(runner, tmp_path):
    first = tmp_path / "a"
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(first)).exit_code == 0
    calls_before = _calls(first)
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(first)).exit_code == 0
    after = _calls(first)
    new_rows = after[len(calls_before):]
    assert new_rows == []  # every item was reused: not even a cache lookup was needed
    other = tmp_path / "b"
    assert run_cli(runner, "airline", "--events", "12", "--workspace", str(other)).exit_code == 0
    reports = [comparable(json.loads(p.read_text())) for p in sorted(first.glob("runs/*/report.json"))]
    assert reports[0] == reports[1] == comparable(load_report(other))
    changed = tmp_path / "c"
    assert run_cli(runner, "airline", "--events", "12", "--seed", "5", "--workspace", str(changed)).exit_code == 0
    assert comparable(load_report(changed))["results"] != reports[0]["results"]


def _calls(workspace: Path) -> list[tuple]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return conn.execute("SELECT request_hash, cached FROM llm_calls ORDER BY id").fetchall()


def _artefacts(workspace: Path) -> dict[str, int]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return dict(conn.execute("SELECT kind, COUNT(*) FROM artefacts GROUP BY kind").fetchall())


def test_killed_run_resumes_to_the_same_report(tmp_path):
    """Kill a run half-way (SIGKILL), run it again: it finishes without redoing finished items or
    repeating model calls, and its report equals an uninterrupted run's."""
    reference = tmp_path / "reference"
    args = [sys.executable, "-m", "intellagent", "run", "retail", "--events", "30"]
    # different hash seeds: the result must not depend on set or dict-of-str iteration order
    done = subprocess.run(args + ["--workspace", str(reference)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONHASHSEED="1"))
    assert done.returncode == 0, done.stderr

    workspace = tmp_path / "killed"
    proc = subprocess.Popen(args + ["--workspace", str(workspace)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONHASHSEED="2"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (workspace / "intellagent.db").exists():
            try:
                if _artefacts(workspace).get("dialog", 0) >= 5:
                    break
            except sqlite3.OperationalError:
                pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _artefacts(workspace)
    assert 0 < partial.get("verdict", 0) < 30 or partial.get("dialog", 0) < 30

    resumed = subprocess.run(args + ["--workspace", str(workspace)], capture_output=True,
                             text=True, timeout=300, env=dict(os.environ, PYTHONHASHSEED="3"))
    assert resumed.returncode == 0, resumed.stderr
    assert _artefacts(workspace) == _artefacts(reference)
    made = [h for h, cached in _calls(workspace) if not cached]
    assert len(made) == len(set(made)), "a model call was repeated"
    assert comparable(load_report(workspace)) == comparable(load_report(reference))


def test_swapping_a_stage_is_one_line_of_yaml(runner, tmp_path):
    pipeline = (REPO / "plugins" / "pipelines" / "intellagent.yaml").read_text()
    swapped = tmp_path / "uniform.yaml"
    swapped.write_text(pipeline.replace("{use: weighted-walk,", "{use: uniform-walk,"))
    assert runner.invoke(cli, ["validate", str(swapped)]).output.startswith("ok: pipeline uniform.yaml")
    result = run_cli(runner, "education", "--pipeline", str(swapped), "--events", "10",
                     "--workspace", str(tmp_path / "ws"))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("old,new,message", [
    ("{use: weighted-walk,", "{use: policy-graph,", "stages.sampler.use: 'policy-graph' is a extractor, not a sampler"),
    ("{use: weighted-walk,", "{use: no-such-walk,", "no stage named 'no-such-walk'"),
    ("with: {events: 30, complexity: [2, 11]}", "with: {events: 30, complexity: [2, 11], colour: red}",
     "unknown key 'colour' (options of intellagent/weighted-walk)"),
    ("{use: openai-tools}", "{use: telepathy}", "no agent named 'telepathy'"),
    ("report: [html, json, csv]", "report: [html, pdf]", "no stage named 'pdf'"),
])
def test_validate_rejects_a_broken_pipeline(old, new, message, runner, tmp_path):
    text = (REPO / "plugins" / "pipelines" / "intellagent.yaml").read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new))
    result = runner.invoke(cli, ["validate", str(bad)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "bad.yaml:" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_stage_that_does_not_fit_is_rejected(runner, tmp_path):
    import types

    from pydantic import BaseModel

    from intellagent import hookimpl
    from intellagent.stages import Generator

    class Blueprint(BaseModel):
        steps: list[str]

    class BlueprintGenerator(Generator):
        name = "from-blueprints"
        consumes = (Blueprint,)

    plugin = types.ModuleType("blueprints")
    plugin.register_stages = hookimpl(lambda register: register(BlueprintGenerator))
    text = (REPO / "plugins" / "pipelines" / "intellagent.yaml").read_text()
    bad = tmp_path / "p.yaml"
    bad.write_text(text.replace("{use: symbolic-events}", "{use: blueprints/from-blueprints}"))
    result = runner.invoke(cli, ["validate", str(bad)], obj={"plugins": (plugin,)})
    assert result.exit_code == 2
    assert "'from-blueprints' needs Blueprint, which no earlier stage produces" in result.stderr


def test_run_against_the_local_server_over_http(runner, tmp_path):
    with OpenAIServer() as server:
        pipeline = tmp_path / "http.yaml"
        pipeline.write_text((REPO / "plugins" / "pipelines" / "intellagent.yaml").read_text().replace(
            "default: {model: mock/schema}", f"default: {{model: gpt-4o-mini, base_url: '{server.base_url}'}}"))
        result = run_cli(runner, "airline", "--pipeline", str(pipeline), "--events", "30",
                         "--workspace", str(tmp_path / "ws"))
        assert result.exit_code == 0, result.output
        assert len(server.requests) > 20
        roles = {c.split("|")[0] for c in _roles(tmp_path / "ws")}
        report = load_report(tmp_path / "ws")
        expected = {"extractor", "generator", "user", "agent", "critic"}
        if len(report["graph"]["policies"]) > 1:
            expected.add("edges")
        assert expected <= roles
        assert report["totals"]["events"] == 30
        assert any(r["dialog"] for r in report["results"])


def _roles(workspace: Path) -> list[str]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return [f"{r}|{m}" for r, m in conn.execute("SELECT role, model FROM llm_calls")]


def test_stage_commands_build_on_each_other(runner, tmp_path):
    ws = ["--workspace", str(tmp_path)]
    events = runner.invoke(cli, ["events", "airline", "--events", "8", *ws])
    assert events.exit_code == 0, events.output
    lines = events.stdout.strip().splitlines()
    assert len(lines) == 8 and all(l.startswith("E00") for l in lines)
    assert _artefacts(tmp_path).get("event") == 8 and "dialog" not in _artefacts(tmp_path)

    simulated = runner.invoke(cli, ["simulate", "airline", "--events", "8", *ws])
    assert simulated.exit_code == 0, simulated.output
    assert _artefacts(tmp_path)["event"] == 8 and "verdict" not in _artefacts(tmp_path)
    dialogs = _artefacts(tmp_path).get("dialog", 0)
    assert dialogs == sum(1 for l in simulated.stdout.splitlines() if "turns" in l)

    critiqued = runner.invoke(cli, ["critique", "airline", "--events", "8", *ws])
    assert critiqued.exit_code == 0, critiqued.output
    assert _artefacts(tmp_path)["dialog"] == dialogs and _artefacts(tmp_path)["verdict"] == dialogs
    assert not list(tmp_path.glob("runs/*/report.html"))

    calls_before = len(_calls(tmp_path))
    full = runner.invoke(cli, ["run", "airline", "--events", "8", *ws])
    assert full.exit_code == 0 and len(_calls(tmp_path)) == calls_before  # everything reused

    again = runner.invoke(cli, ["report", "latest", "--format", "csv", *ws])
    assert again.exit_code == 0 and again.stdout.startswith("report: ") and again.stdout.strip().endswith("report.csv")
    rows = (tmp_path / again.stdout.strip()[8:]).read_text().splitlines()
    assert len(rows) == 9 and rows[0].startswith("event,status,complexity")
