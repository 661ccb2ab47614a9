"""A pipeline file whose parts name nothing real is refused by ``validate`` and by ``run``, before
any model call, in one line naming the file and line (or the flag), exit code 2: a model no
provider knows, a mock's options that do not fit, a ``params:`` entry naming no step, option,
role or field, a parameter that could never be given on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line

PIPELINE = """\
llm:
  default: {model: mock/schema}
steps:
  graph: {use: policy-graph}
  specs: {use: weighted-walk, from: graph, with: {events: 3}}
params:
  events: steps.specs.with.events
"""

CASES = [
    ("default: {model: mock/schema}", "default: {model: mock/nope}", "p.yaml:2",
     "llm.default.model: unknown mock model 'mock/nope' (mock/schema, mock/scripted, mock/function, mock/demo)"),
    ("default: {model: mock/schema}", "default: {model: ''}", "p.yaml:2",
     "llm.default.model: a model name cannot be empty"),
    ("default: {model: mock/schema}", "default: {model: mock/schema, options: {list_items: many}}", "p.yaml:2",
     "mock/schema options.list_items: Input should be a valid integer"),
    ("default: {model: mock/schema}", "default: {model: mock/schema, options: {replies: [a]}}", "p.yaml:2",
     "mock/schema unknown option 'replies' (options: list_items, tool_call_rate)"),
    ("default: {model: mock/schema}", "default: {model: mock/function}", "p.yaml:2",
     "mock/function needs options: {function: ...}"),
    ("default: {model: mock/schema}", "default: {model: gpt-4o, provider: nope}", "p.yaml:2",
     "llm.default.provider: no llm-provider named 'nope'"),
    ("default: {model: mock/schema}", "default: {model: gpt-4o, base_url: 'localhost:8000/v1'}", "p.yaml:2",
     "llm.default.base_url: 'localhost:8000/v1' is not an http:// or https:// URL with a host"),
    ("default: {model: mock/schema}", "default: {model: mock/schema}\n  roles: {edges: {model: mock/nope}}",
     "p.yaml:3", "llm.roles.edges.model: unknown mock model 'mock/nope'"),
    ("events: steps.specs.with.events", "events: steps.nope.with.x", "p.yaml:7",
     "params.events: 'steps.nope.with.x' is not a path into this pipeline: no step named 'nope' (steps: graph, specs)"),
    ("events: steps.specs.with.events", "events: steps.specs.with.evnts", "p.yaml:7",
     "'evnts' is not an option of intellagent/weighted-walk (options: events, complexity, batch)"),
    ("events: steps.specs.with.events", "events: steps.specs.with.events.count", "p.yaml:7",
     "'events' holds a single value, not 'count'"),
    ("events: steps.specs.with.events", "events: llm.roles.judge.model", "p.yaml:7",
     "no model role 'judge' (roles: edges, extractor)"),
    ("events: steps.specs.with.events", "events: llm.timeot", "p.yaml:7", "'timeot' is not an option"),
    ("events: steps.specs.with.events", "events: agent.with.url", "p.yaml:7",
     "no step of this pipeline talks to the agent under test"),
    ("events: steps.specs.with.events", "events: report.html", "p.yaml:7",
     "'report' is none of steps, llm, agent, executor, seed"),
    ("events: steps.specs.with.events", "Events: steps.specs.with.events", "p.yaml:7",
     "parameter name 'Events' must be lower-case letters, digits and '-'"),
    ("llm:\n", "store: mysql://me@host/db\nllm:\n", "p.yaml:1",
     "store: a store is on SQLite or PostgreSQL, not mysql"),
    ("with: {events: 3}", "with: {events: " + "9" * 5000 + "}", "p.yaml:5",
     "invalid YAML: a number of 5,000 digits, past the bound of 4,300"),
]


@pytest.mark.parametrize("old,new,where,what", CASES, ids=[c[1].split(":")[0] + str(i) for i, c in enumerate(CASES)])
def test_a_pipeline_naming_nothing_real_is_refused_by_validate_and_run(old, new, where, what, runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.replace(old, new))
    assert_one_clean_line(runner.invoke(cli, ["validate", str(pipeline)]), where, what)
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not (tmp_path / "ws").exists()


def test_the_built_in_pipelines_still_validate(runner):
    root = Path(__file__).resolve().parent.parent / "plugins"
    for path in sorted(root.glob("*/pipeline.yaml")) + [root / "tooltalk" / "generate.yaml"]:
        result = runner.invoke(cli, ["validate", str(path)])
        assert result.exit_code == 0, (path, result.output)


@pytest.mark.parametrize("flags,flag", [(["--events", "9" * 5000], "--events"),
                                        (["--set", "seed=" + "9" * 5000], "--set seed")])
def test_a_number_past_the_digit_limit_on_the_command_line_names_its_flag(flags, flag, runner, tmp_path):
    """Python refuses to read an integer of more than 4,300 digits: such a value of a flag was an
    internal error (exit 3), not bad input naming the flag."""
    result = runner.invoke(cli, ["run", "education", "--workspace", str(tmp_path / "ws"), *flags])
    assert_one_clean_line(result, flag, "Unable to parse input string as an integer")
    assert not (tmp_path / "ws").exists()


BOMB = ("[&a [x,x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], "
        "&d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], "
        "&f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e], &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f], *g]")


@pytest.mark.parametrize("flags,flag", [
    (["--set", "llm.roles.agent={model: gpt-4o-mini, options: {extra: " + BOMB + "}}"], "--set llm.roles.agent"),
    (["--events", BOMB], "--events")])
def test_an_alias_bomb_on_the_command_line_is_refused_naming_its_flag(flags, flag, runner, tmp_path):
    """A value of a flag is YAML too: ten million values from one line passed validate and hung
    the run (40 s and counting, expanding them to store the run's config)."""
    result = runner.invoke(cli, ["run", "education", "--workspace", str(tmp_path / "ws"), *flags])
    assert_one_clean_line(result, f"error: {flag}: ", "its aliases expand to more than 1,000,000 values")
    assert not (tmp_path / "ws").exists()
