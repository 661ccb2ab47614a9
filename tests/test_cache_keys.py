"""Every input that shapes a step's result is in its cache key, and nothing else: changing one
role's model, one step's options or an upstream input re-runs exactly the steps it affects, and
the model calls made are exactly those steps' roles."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.conftest import REPO

STEPS = ("graph", "specs", "events", "dialogs", "verdicts")


def run(runner, workspace: Path, *args: str, env: str = "airline") -> str:
    result = runner.invoke(cli, ["run", env, "--events", "6", "--workspace", str(workspace), *args])
    assert result.exit_code == 0, result.output + str(result.exception)
    return result.stdout.split()[1].rstrip(":")


def keys(workspace: Path, run_id: str) -> dict[str, set[str]]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        rows = conn.execute("SELECT step, key FROM run_items WHERE run_id = ?", (run_id,)).fetchall()
    out: dict[str, set[str]] = {s: set() for s in STEPS}
    for step, key in rows:
        out[step].add(key)
    return out


def new_calls(workspace: Path, run_id: str) -> dict[str, int]:
    """Model calls the run made (not cache hits), by role."""
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return dict(conn.execute("SELECT role, COUNT(*) FROM llm_calls WHERE run_id = ? AND cached = 0 "
                                 "GROUP BY role", (run_id,)).fetchall())


def rerun(runner, workspace: Path, *args: str, env: str = "airline") -> tuple[set[str], dict[str, int]]:
    """Which steps got new items, and the calls by role, when ``args`` change a first run."""
    first = run(runner, workspace, env=env)
    second = run(runner, workspace, *args, env=env)
    a, b = keys(workspace, first), keys(workspace, second)
    changed = {s for s in STEPS if a[s] != b[s]}
    for s in STEPS:
        if s not in changed:
            assert a[s] == b[s]
    return changed, new_calls(workspace, second)


@pytest.fixture
def ws(tmp_path):
    return tmp_path / "ws"


def test_nothing_changed_nothing_reruns(runner, ws):
    changed, calls = rerun(runner, ws)
    assert changed == set() and calls == {}


def test_the_agents_model_reruns_only_dialogs_and_verdicts(runner, ws):
    changed, calls = rerun(runner, ws, "--set", "llm.roles.agent.model=mock/schema",
                           "--set", "llm.roles.agent.options.tool_call_rate=0.9")
    assert changed == {"dialogs", "verdicts"}
    assert set(calls) <= {"agent", "user", "critic"} and calls.get("agent", 0) > 0


def test_the_generators_model_reruns_events_and_what_follows(runner, ws):
    changed, calls = rerun(runner, ws, "--set", "llm.roles.generator.model=mock/schema",
                           "--set", "llm.roles.generator.options.list_items=2")
    assert changed == {"events", "dialogs", "verdicts"}
    assert "extractor" not in calls and "edges" not in calls and calls.get("generator", 0) > 0


def test_the_edge_scorers_model_reruns_from_the_graph(runner, ws):
    changed, calls = rerun(runner, ws, "--set", "llm.roles.edges.model=mock/schema",
                           "--set", "llm.roles.edges.options.list_items=9")
    assert "graph" in changed and calls.get("edges", 0) > 0
    assert "extractor" not in calls  # flows and policies: same requests, answered from the cache


def test_a_steps_options_rerun_that_step_and_what_follows(runner, ws):
    changed, calls = rerun(runner, ws, "--set", "steps.dialogs.with.max_turns=2")
    assert changed == {"dialogs", "verdicts"}
    assert set(calls) <= {"agent", "user", "critic"}


def test_a_critic_option_reruns_only_the_verdicts(runner, ws):
    changed, calls = rerun(runner, ws, "--set", "steps.verdicts.with.transcript_chars=5000")
    assert changed == {"verdicts"}
    assert set(calls) <= {"critic"}


def test_an_upstream_input_reruns_what_depends_on_it(runner, ws, tmp_path):
    env = tmp_path / "airline"
    shutil.copytree(REPO / "environments" / "airline", env)
    first = run(runner, ws, env=str(env))
    (env / "prompt.md").write_text((env / "prompt.md").read_text() + "\n- Be brief.\n")
    second = run(runner, ws, env=str(env))
    a, b = keys(ws, first), keys(ws, second)
    assert all(a[s] != b[s] for s in STEPS)  # the prompt feeds the graph, and so everything
    assert new_calls(ws, second).get("extractor", 0) > 0


def test_the_environments_data_is_part_of_the_key(runner, ws, tmp_path):
    env = tmp_path / "airline"
    shutil.copytree(REPO / "environments" / "airline", env)
    first = run(runner, ws, env=str(env))
    flights = env / "data" / "flights.json"
    flights.write_text(flights.read_text().replace('"available"', '"cancelled"', 1))
    second = run(runner, ws, env=str(env))
    assert keys(ws, first)["events"] != keys(ws, second)["events"]


def test_another_seed_reruns_everything(runner, ws):
    changed, _ = rerun(runner, ws, "--seed", "9")
    assert changed == set(STEPS)


def test_more_events_reuse_the_events_already_made(runner, ws):
    first = run(runner, ws)
    second = run(runner, ws, "--events", "9")
    a, b = keys(ws, first), keys(ws, second)
    assert a["events"] < b["events"] and len(b["events"]) == 9  # the first six, then three more
    assert a["verdicts"] <= b["verdicts"]
    with sqlite3.connect(ws / "intellagent.db") as conn:
        made = conn.execute("SELECT COUNT(*) FROM items WHERE step = 'intellagent/symbolic-events'").fetchone()[0]
    assert made == 9
