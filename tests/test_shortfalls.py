"""Honest summaries: a step whose items are none (or few) usable says so in the terminal summary
and the report, with the step's own hint on how to get a useful run, and the steps left with
nothing to work on are named; a run that made its output says nothing of the kind."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.conftest import REPO


def run(runner, tmp_path: Path, *args: str) -> tuple[str, dict, str]:
    result = runner.invoke(cli, ["run", *args, "--workspace", str(tmp_path), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    folder = next((tmp_path / "runs").iterdir())
    return (result.output, json.loads((folder / "report.json").read_text(encoding="utf-8")),
            (folder / "report.html").read_text(encoding="utf-8"))


def test_almita_on_the_schema_mock_says_nothing_came_out_and_how_to_get_a_useful_run(runner, tmp_path):
    output, report, html = run(runner, tmp_path, "almita", "--pipeline", "almita", "--model", "mock/schema")
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["tests"]["items"] == 0  # what the lines below must say
    first, starved = report["shortfalls"]
    assert first.startswith("nothing came out of step flowgraphs: 4 item(s), none usable (4 rejected)")
    assert "--model gpt-4o-mini" in first and "tests/almita_script.py" in first
    assert starved.startswith("steps graphs, noisy, paths, conversations, tests")
    for line in report["shortfalls"]:
        assert f"  {line}" in output
        assert line.split(":")[0] in html


def test_apigen_blueprints_that_all_fail_review_are_nothing_out_not_a_verdict(runner, tmp_path):
    _, report, _ = run(runner, tmp_path, "retail", "--pipeline", "apigen-mt", "--model", "mock/schema",
                       "--blueprints", "3")
    assert report["outcomes"] == {"fail": 3}
    assert report["shortfalls"][0].startswith("nothing came out of step blueprints: 3 item(s), none usable (3 fail)")
    assert "review committee" in report["shortfalls"][0]
    assert "events" in report["shortfalls"][-1] and "nothing to work on" in report["shortfalls"][-1]


def test_a_run_that_makes_its_output_has_no_shortfall(runner, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))  # tests.almita_script, the scripted model README names
    output, report, html = run(runner, tmp_path, "almita", "--pipeline", "almita", "--model", "mock/function",
                               "--set", "llm.default.options.function=tests.almita_script:answer")
    assert {s["name"]: s["items"] for s in report["steps"]}["tests"] > 0
    assert report["shortfalls"] == [] and "nothing came out" not in output and "shortfall" not in html


@pytest.mark.parametrize("statuses, kind, expected", [
    ({"fail": 4}, "critic", 4),  # failed verdicts are verdicts
    ({"fail": 4}, "generator", 0),  # a failed (rejected) generation is not output
    ({"ok": 1, "invalid": 3}, "generator", 1),
    ({"degraded": 2, "infra-error": 2}, "extractor", 2),
])
def test_usable_counts_what_the_step_declares_as_output(statuses, kind, expected):
    from types import SimpleNamespace

    from intellagent.results import StepSummary, usable
    from intellagent.steps import Statuses

    plugin = SimpleNamespace(statuses=Statuses(passed=["ok", "pass"], failed=["fail"], other=["invalid"]))
    plan = SimpleNamespace(steps={"s": SimpleNamespace(plugin=plugin)})
    assert usable(plan, StepSummary(name="s", use="x", kind=kind, items=4, statuses=statuses)) == expected


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None,
                    reason="ToolTalk's reference is not installed: pip install --no-deps nvidia-tooltalk")
def test_tooltalk_generation_on_the_schema_mock_says_how_few_conversations_it_made(runner, tmp_path):
    _, report, _ = run(runner, tmp_path, "tooltalk", "--pipeline", "tooltalk-generate", "--model", "mock/schema",
                       "--requests", "6")
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["conversations"]["statuses"].get("ok", 0) * 2 < steps["conversations"]["items"]
    line = next(line for line in report["shortfalls"] if "step conversations" in line)
    assert "invalid" in line and "run with a real model (--model gpt-4o)" in line


def test_a_healthy_run_with_an_empty_step_and_a_real_model_falling_short_are_told_apart():
    """An empty step is starved only below a step that fell short (APIGen-MT's recombination is
    empty with pairs: 0 on a healthy run); the hint to use a real model is for mock runs or a
    step that made nothing."""
    from intellagent.plan import load_plan, model_overrides
    from intellagent.registry import load_registry
    from intellagent.results import StepSummary, shortfalls

    def summaries(blueprints: dict[str, int]) -> list[StepSummary]:
        counts = {"graph": {"ok": 1}, "contexts": {"ok": 1}, "blueprints": blueprints, "pairs": {"ok": 1},
                  "combined": {}, "tasks": {"ok": 1}, "events": {"ok": 9}, "dialogs": {"ok": 9},
                  "verdicts": {"pass": 5, "fail": 4}}
        return [StepSummary(name=n, use=n, kind="generator" if n == "blueprints" else "step",
                            items=sum(c.values()), statuses=c) for n, c in counts.items()]

    real = load_plan("apigen-mt", load_registry(), overrides=model_overrides("gpt-4o-mini"))
    assert shortfalls(real, summaries({"pass": 9})) == []
    lines = shortfalls(real, summaries({"pass": 9, "fail": 11}))
    assert lines[0].startswith("step blueprints made only 9 usable item(s) of 20")
    assert not any("real model" in line for line in lines)
    mock = load_plan("apigen-mt", load_registry())
    assert "real model" in shortfalls(mock, summaries({"pass": 9, "fail": 11}))[0]


def test_a_report_written_before_the_values_moved_out_is_read_as_it_is(tmp_path):
    from intellagent_plugins.reporters.writers import read_report

    old = {"items": [{"step": "events", "item": "E1", "status": "ok", "value": {"brief": "b"}}]}
    (tmp_path / "report.json").write_text(json.dumps(old))
    assert read_report(tmp_path / "report.json") == old
