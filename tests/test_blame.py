"""An error is blamed on its true source: a value a flag set (``--set``, ``--model``, ``--agent``,
``--seed``, ``--budget``, ``--workers``, a pipeline's own ``--PARAM``) on that flag; a fault of the
pipeline file on the file and line, also when flags changed something else in it; and a fault a
flag brings into a part of the file it did not touch (a step swapped for one whose output the
next step cannot take) on the flag. Always one line, exit code 2."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line

PIPELINE = """\
llm: {default: {model: mock/schema}}
steps:
  graph: {use: policy-graph}
  specs: {use: weighted-walk, from: graph, with: {events: 3}}
  events: {use: symbolic-events, each: specs, from: graph}
metrics:
  invalid: {use: listing, with: {step: events, statuses: [invalid]}}
params:
  events: steps.specs.with.events
seed: 3
"""


def run(runner, tmp_path: Path, text: str, *flags: str):
    (tmp_path / "p.yaml").write_text(text)
    return runner.invoke(cli, ["run", "education", "--pipeline", str(tmp_path / "p.yaml"),
                               "--workspace", str(tmp_path / "ws"), *flags])


# the file's faults, found while flags changed other values of the same step or block
FILE_FAULTS = [
    ("  events: {use: symbolic-events, each: specs, from: graph}", "  events: {use: symbolic-events, each: specs}",
     ["--set", "steps.events.with.repairs=1"], "p.yaml:5", "input 'graph' (PolicyGraph) of "
     "'intellagent/symbolic-events' is not wired"),
    ("with: {events: 3}", "with: {events: 3, complexity: [9, 1]}", ["--events", "2"], "p.yaml:4",
     "complexity must be [low, high]"),
    ("with: {step: events,", "with: {step: evnts,", ["--set", "metrics.invalid.with.limit=5"], "p.yaml:7",
     "no step named 'evnts'"),
    ("with: {events: 3}", "with: {events: 3, batch: many}", ["--set", "steps.specs.with.complexity=[2, 4]"],
     "p.yaml:4", "steps.specs.with.batch"),
]


@pytest.mark.parametrize("old,new,flags,where,what", FILE_FAULTS, ids=["wiring", "option", "metric", "type"])
def test_a_fault_of_the_file_is_the_files_whatever_flags_change_beside_it(old, new, flags, where, what,
                                                                          runner, tmp_path):
    result = run(runner, tmp_path, PIPELINE.replace(old, new), *flags)
    assert_one_clean_line(result, where, what)
    assert "--set" not in result.stderr and "--events" not in result.stderr


FLAG_FAULTS = [
    (["--set", "steps.specs.use=uniform-walk", "--set", "steps.graph.use=uniform-walk"], "--set steps.graph.use",
     "steps.graph: input 'graph' (PolicyGraph) of 'intellagent/uniform-walk' is not wired"),
    (["--set", "steps.specs.use=tau-bench/tasks"], "--set steps.specs.use", "missing required key 'tasks'"),
    (["--set", "seed.x=1"], "--set seed.x", "cannot set 'seed.x': seed is 3"),
    (["--set", "steps.specs.with.complexity=[5, 1]"], "--set steps.specs.with.complexity",
     "complexity must be [low, high]"),
    (["--set", "metrics.invalid.with.step=nope"], "--set metrics.invalid.with.step", "no step named 'nope'"),
    (["--set", "metrics.more={use: listing, with: {step: nope, statuses: [ok]}}"], "--set metrics.more", "no step named 'nope'"),
    (["--model", "mock/nope"], "--model", "unknown mock model 'mock/nope'"),
    (["--model", ""], "--model", "a model name cannot be empty"),
    (["--seed", "-1", "--budget", "-2"], "--budget", "llm.budget_usd"),
    (["--events", "-3"], "--events", "steps.specs.with.events"),
    (["--events", "three"], "--events", "steps.specs.with.events"),
    (["--workers", "0", "--executor", "processes"], "--workers", "executor.with.workers"),
    (["--workers", "2"], "--workers", "unknown key 'workers' (options of intellagent/local)"),
    (["--set", "llm.roles.nobody.model=mock/schema"], "--set llm.roles.nobody.model", "no step of this pipeline "
     "uses a model role 'nobody'"),
    (["--set", "steps..use=x"], "--set steps..use", "a part of the path is empty"),
]


@pytest.mark.parametrize("flags,flag,what", FLAG_FAULTS, ids=lambda v: str(v)[:40] if isinstance(v, str) else None)
def test_a_fault_a_flag_brings_is_the_flags(flags, flag, what, runner, tmp_path):
    result = run(runner, tmp_path, PIPELINE, *flags)
    assert_one_clean_line(result, f"error: {flag}: ", what)
    assert "p.yaml:" not in result.stderr.split(what)[0]
    assert not (tmp_path / "ws").exists()


needs_tooltalk = pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None,
                                    reason="ToolTalk's data is not installed")


@needs_tooltalk
def test_a_steps_check_against_the_environment_blames_where_the_option_came_from(runner, tmp_path):
    """tooltalk/match refuses a threshold on a field no tool compares as text; the check runs
    against the environment, after the plan is made, and still names the flag or the line."""
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path / "ws"),
                                 "--set", "steps.matches.with.thresholds={Nope.body: 0.5}"])
    assert_one_clean_line(result, "error: --set steps.matches.with.thresholds: ", "no text field 'Nope.body'")
    text = (Path(__file__).resolve().parent.parent / "plugins" / "tooltalk" / "pipeline.yaml").read_text()
    (tmp_path / "p.yaml").write_text(text.replace("with: {comparator: token-sort}",
                                                  "with: {comparator: token-sort, thresholds: {Nope.body: 0.5}}"))
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", str(tmp_path / "p.yaml"), "--workspace",
                                 str(tmp_path / "ws"), "--set", "steps.matches.with.comparator=exact"])
    assert_one_clean_line(result, "p.yaml:12", "no text field 'Nope.body'")
    assert not (tmp_path / "ws").exists()
