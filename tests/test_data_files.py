"""Files a pipeline reads besides the environment (τ-bench task files, ToolTalk conversations,
APIGen-MT personas) are read through one reader: whatever is wrong with one (not UTF-8, not JSON,
nested too deeply, an entry of the wrong shape, an action no tool answers, nothing in it) is one
line naming the file (and the line or entry), exit code 2, never a crash and never a run that
passes on nothing."""

from __future__ import annotations

import importlib.util
import json

import pytest

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line

TASK = {"user_id": "u1", "instruction": "Cancel my order.", "actions": [], "outputs": []}

TASK_FILES = [
    (b"\xff\xfe[]", "t.json", "not UTF-8 text"),
    ("[1, 2]", "t.json", "task 0: Input should be a valid dictionary or instance of TauTask"),
    (json.dumps([{**TASK, "index": "seven"}]), "t.json", "task 0: index: Input should be a valid integer"),
    (json.dumps([{**TASK, "actions": 5}]), "t.json", "task 0: actions: Input should be a valid list"),
    (json.dumps([{**TASK, "actions": [{"name": "cancel_pending_order"}, {"kwargs": {}}]}]), "t.json",
     "task 0: actions.1.name: Field required"),
    (json.dumps([{**TASK, "actions": [{"name": "teleport", "kwargs": {}}]}]), "t.json",
     "task 0: action 'teleport' is no tool of environment 'retail'"),
    ("[]", "t.json", "holds no task"),
    (json.dumps([{**TASK, "instruction": " "}]), "t.json", "task 0: no instruction"),
    (json.dumps([{"foo": 1}]), "t.json", "task 0: no instruction"),
    ("[" * 50_000 + "]" * 50_000, "t.json", "invalid JSON: nested too deeply"),
    ('{"tasks": []}', "t.json:1", "a task file is a JSON list of tasks"),
]


@pytest.mark.parametrize("text,where,what", TASK_FILES, ids=[c[2][:30] for c in TASK_FILES])
def test_a_tau_bench_task_file(text, where, what, runner, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--tasks", str(path),
                                 "--agent", "tau-bench/oracle", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)


def test_task_indices_that_name_no_task(runner, tmp_path):
    (tmp_path / "t.json").write_text(json.dumps([TASK]))
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--tasks", str(tmp_path / "t.json"),
                                 "--agent", "tau-bench/oracle", "--workspace", str(tmp_path / "ws"),
                                 "--set", "steps.tasks.with.indices=[0, 7]"])
    assert_one_clean_line(result, "steps.tasks.with.indices", "indices [7] name no task of t.json")


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None, reason="ToolTalk's data is not installed")
@pytest.mark.parametrize("text,what", [
    ("[1]", "not a ToolTalk conversation: expected a JSON object, got a list"),
    (b"\xff", "not UTF-8 text"),
    ("{", "invalid JSON"),
])
def test_a_tooltalk_conversation_file(text, what, runner, tmp_path):
    folder = tmp_path / "conversations"
    folder.mkdir()
    path = folder / "c.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--folder", str(folder),
                                 "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "conversations/c.json", what)


@pytest.mark.parametrize("name,text,what", [
    ("p.json", "{", "p.json:1: invalid JSON"),
    ("p.txt", b"\xff", "p.txt: not UTF-8 text"),
    ("p.yaml", "[]", "personas must be a non-empty list of strings"),
])
def test_an_apigen_persona_file_is_refused_before_any_step(name, text, what, runner, tmp_path):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--workspace", str(tmp_path / "ws"),
                                 "--set", f"steps.contexts.with.personas={path}"])
    assert_one_clean_line(result, "--set steps.contexts.with.personas", what)
    assert not (tmp_path / "ws").exists()


def test_a_pipeline_for_another_environment_or_with_a_reporter_twice(runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("environment: airline\nsteps:\n  graph: {use: policy-graph}\n")
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "p.yaml:1", "this pipeline is for environment 'airline', not 'education'")
    assert runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--workspace",
                               str(tmp_path / "ws")]).exit_code == 0
    pipeline.write_text("steps:\n  graph: {use: policy-graph}\nreport: [html, json, html]\n")
    result = runner.invoke(cli, ["validate", str(pipeline)])
    assert_one_clean_line(result, "p.yaml:3", "report[2]: 'html' is named twice")
