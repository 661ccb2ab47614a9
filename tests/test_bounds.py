"""Every size a user can pass has an upper bound, refused before any work with one line naming
the flag or the file and line (exit 2); and a step never makes more than ``MAX_ITEMS`` items,
however it gets there (a long task file, fan-outs that multiply): docs/input-and-bounds.md, Bounds."""

from __future__ import annotations

import importlib.util
import json
import time

import pytest

from intellagent.bounds import MAX_ITEMS
from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line


def test_a_billion_events_are_refused_before_anything_is_made(runner, tmp_path):
    started = time.monotonic()
    result = runner.invoke(cli, ["run", "airline", "--events", "1000000000", "--until", "specs",
                                 "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "--events", f"steps.specs.with.events: Input should be less than or "
                          f"equal to {MAX_ITEMS}")
    assert time.monotonic() - started < 10 and not (tmp_path / "ws").exists()


SIZES = [  # (pipeline, a flag past its bound, what the line names)
    ("intellagent", "steps.dialogs.with.max_turns=201", "steps.dialogs.with.max_turns"),  # README: 200
    ("intellagent", "steps.dialogs.with.max_feedback=1000", "steps.dialogs.with.max_feedback"),
    ("intellagent", "steps.events.with.repairs=1000", "steps.events.with.repairs"),
    ("intellagent", "steps.graph.with.block_size=1000000", "steps.graph.with.block_size"),
    ("intellagent", "steps.specs.with.batch=1000000000", "steps.specs.with.batch"),
    ("intellagent", "steps.verdicts.with.transcript_chars=1000000000", "steps.verdicts.with.transcript_chars"),
    ("intellagent", "llm.max_concurrency=100000000", "llm.max_concurrency"),
    ("intellagent", "llm.max_retries=1000", "llm.max_retries"),
    ("intellagent", "llm.timeout=1e12", "llm.timeout"),
    ("intellagent", "llm.default.max_tokens=1e12", "llm.default.max_tokens"),
    ("intellagent", "llm.default.options.list_items=100000000", "list_items"),
    ("intellagent", "seed=100000000000000000000000", "seed"),
    ("intellagent", "report=[{use: html, with: {items_per_page: 10000000}}]", "report[0].with.items_per_page"),
    ("intellagent", "executor={use: processes, with: {workers: 1000000}}", "executor.with.workers"),
    ("intellagent", "executor.with.items_in_flight=1000000000", "executor.with.items_in_flight"),
    ("intellagent", "metrics.listed={use: listing, with: {step: events, statuses: [invalid], limit: 1000000000}}",
     "metrics.listed.with.limit"),
    ("tau-bench", "steps.tasks.with.trials=1000000", "steps.tasks.with.trials"),
    ("apigen-mt", "steps.contexts.with.blueprints=1000000", "steps.contexts.with.blueprints"),
    ("apigen-mt", "steps.blueprints.with.review_rounds=1000", "steps.blueprints.with.review_rounds"),
    ("apigen-mt", "steps.pairs.with.pairs=10000000", "steps.pairs.with.pairs"),
    ("almita", "steps.intents.with.count=1000000", "steps.intents.with.count"),
    ("almita", "steps.paths.with.paths=1000000", "steps.paths.with.paths"),
    ("tooltalk-generate", "steps.subsets.with.requests=100000000", "steps.subsets.with.requests"),
    ("tooltalk", "steps.replays.with.max_calls=1000000", "steps.replays.with.max_calls"),
]


@pytest.mark.parametrize("pipeline,setting,what", SIZES, ids=[s[1].split("=")[0] for s in SIZES])
def test_every_size_has_a_bound(pipeline, setting, what, runner, tmp_path):
    env = "tooltalk" if pipeline.startswith("tooltalk") else "retail"
    result = runner.invoke(cli, ["run", env, "--pipeline", pipeline, "--workspace", str(tmp_path / "ws"),
                                 "--set", setting])
    assert_one_clean_line(result, f"--set {setting.split('=')[0]}", what)
    assert "less than" in result.stderr or "at most" in result.stderr or "(options: " in result.stderr
    assert not (tmp_path / "ws").exists()


def test_a_task_file_too_long_for_its_trials_is_refused_naming_it(runner, tmp_path):
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"user_id": "u", "instruction": "i", "actions": [], "outputs": []}] * 60_000))
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--tasks", str(tasks),
                                 "--trials", "2", "--agent", "tau-bench/oracle", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "tasks.json", f"60,000 tasks × 2 trials is more than the {MAX_ITEMS:,} items")


def test_the_runner_refuses_a_step_past_the_bound_however_it_got_there(runner, tmp_path, monkeypatch):
    """A list longer than the bound, and fan-outs whose items add up past it."""
    monkeypatch.setattr("intellagent.bounds.MAX_ITEMS", 5)
    result = runner.invoke(cli, ["run", "education", "--events", "6", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, "step specs", "'intellagent/weighted-walk' gave 6 items; a step may make "
                          "at most 5")
    if importlib.util.find_spec("tooltalk") is None:
        return  # ToolTalk's data is not installed
    # 3 subsets × 2 scenarios each: each list is short, the conversations add up to 6
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk-generate", "--workspace",
                                 str(tmp_path / "ws2"), "--requests", "3", "--set", "steps.scenarios.with.per_request=2"])
    assert_one_clean_line(result, "step conversations", "more than 5 items (a step may make at most that "
                          "many in a run")


BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}' if prev else 'x'] * 10)}]\n"
               for prev, name in zip([None, *"abcdefgh"], "abcdefghi"))  # 10**9 values once expanded


@pytest.mark.parametrize("where", ["pipeline", "tools"])
def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(where, shop, runner, tmp_path):
    """Nine lines of anchors make a billion values: validating them took over 2 minutes and 1.4 GB."""
    if where == "pipeline":
        (tmp_path / "p.yaml").write_text("llm: {default: {model: mock/schema}}\nsteps:\n"
                                         "  graph: {use: policy-graph}\nmetrics:\n  m:\n    use: rate\n    with:\n"
                                         "      score: event\n      anchors:\n"
                                         + "".join("        " + line + "\n" for line in BOMB.splitlines()))
        command, file = ["validate", str(tmp_path / "p.yaml")], "p.yaml"
    else:
        text = (shop / "tools.yaml").read_text()
        (shop / "tools.yaml").write_text(text.replace("    implementation: impl.py:get_customer\n",
                                                      "    implementation: impl.py:get_customer\n    meta:\n"
                                                      + "".join("      " + line + "\n" for line in BOMB.splitlines()), 1))
        command, file = ["validate", str(shop)], "tools.yaml"
    started = time.monotonic()
    result = runner.invoke(cli, command)
    assert_one_clean_line(result, file, "its aliases expand to more than 1,000,000 values (the bound of a YAML file)")
    assert time.monotonic() - started < 10
