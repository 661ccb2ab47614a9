"""A prompts folder holds only what the steps reading it render: a file naming none of their
prompts (a misspelt name) would be ignored while its author believes it tested, so the plan
refuses it before anything runs, naming the file and the nearest prompt. The folder may be shared
by several steps; partials the templates include, README files and hidden files stay allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.conftest import REPO
from tests.test_bad_input import assert_one_clean_line

BUILTIN = REPO / "plugins" / "intellagent" / "prompts"

PIPELINE = """\
llm: {default: {model: mock/schema}}
steps:
  graph: {use: policy-graph, with: {prompts: prompts}}
  specs: {use: weighted-walk, from: graph, with: {events: 2, complexity: [2, 6]}}
  events: {use: symbolic-events, each: specs, from: graph}
  dialogs: {use: policy-user, each: events, with: {max_turns: 2}}
  verdicts: {use: policy-critic, each: dialogs, from: events, with: {prompts: prompts}}
"""


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """The prompts folder of the graph and verdicts steps (a pipeline file names it, relative to
    the current folder, as a user writes it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "prompts").mkdir()
    return tmp_path / "prompts"


def invoke(runner, *extra: str):
    return runner.invoke(cli, ["run", "education", "--pipeline", "p.yaml", "--workspace", "ws", *extra])


@pytest.mark.parametrize("how", [("run",), ("run", "--estimate"), ("validate",)])
def test_a_misspelt_prompt_file_is_refused_naming_it_and_the_nearest_prompt(runner, folder, how):
    (folder / "flow.md").write_text("Find the flows of {{ prompt }}.\n")
    if how == ("validate",):
        result = runner.invoke(cli, ["validate", "p.yaml"])
    else:
        result = invoke(runner, *how[1:])
    assert_one_clean_line(result, "prompts/flow.md", "no step reading this folder (graph, verdicts) "
                          "renders a prompt of that name, so it would be ignored: did you mean flows.md?")
    assert not Path("ws").exists()


def test_a_name_near_no_prompt_lists_the_prompts_of_the_steps_reading_the_folder(runner, folder):
    (folder / "instructions.txt").write_text("Be thorough.\n")
    result = invoke(runner, "--estimate")
    assert_one_clean_line(result, "prompts/instructions.txt", "so it would be ignored (their prompts: "
                          "analyst.system.md, edge_pair.md, edges.md, flows.md, judge.md")


def test_a_folder_shared_by_steps_may_hold_the_prompts_of_each(runner, folder):
    (folder / "flows.md").write_text("List the flows of {{ prompt }}.\n")  # graph's
    (folder / "judge.md").write_text((BUILTIN / "judge.md").read_text() + "\nBe strict.\n")  # verdicts'
    result = invoke(runner, "--estimate")
    assert result.exit_code == 0, result.output


def test_a_prompt_of_a_step_that_does_not_read_the_folder_is_refused_unless_unchanged(runner, folder):
    """stop_check.md is the dialogs step's, which has no prompts: here: an edited copy would be
    ignored; an unchanged copy of the whole built-in folder changes nothing, so it may stay."""
    (folder / "stop_check.md").write_text((BUILTIN / "stop_check.md").read_text() + "\nBe lenient.\n")
    result = invoke(runner, "--estimate")
    assert_one_clean_line(result, "prompts/stop_check.md", "is a prompt of step dialogs, which does "
                          "not read this folder, so it would be ignored: give dialogs `prompts: prompts` "
                          "too, or remove the file")
    for path in BUILTIN.iterdir():
        (folder / path.name).write_text(path.read_text())
    result = invoke(runner, "--estimate")
    assert result.exit_code == 0, result.output


def test_partials_readme_hidden_files_and_other_personas_are_left_alone(runner, folder):
    (folder / "flows.md").write_text('{% import "macros.jinja" as m %}{% include "common.md" %}\n'
                                     "{{ m.ask(prompt) }}\n")
    (folder / "common.md").write_text("You read an agent's instructions.\n")
    (folder / "macros.jinja").write_text("{% macro ask(text) %}List the flows of {{ text }}.{% endmacro %}\n")
    (folder / "README.md").write_text("Our prompts.\n")
    (folder / ".DS_Store").write_bytes(b"\0\1")
    (folder / "flows.md~").write_text("an editor's backup\n")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "flow.md").write_text("not read from here\n")
    result = invoke(runner, "--estimate")
    assert result.exit_code == 0, result.output
    # a persona the dialogs step is not set to now (it reads the folder too): another option picks it
    Path("p.yaml").write_text(PIPELINE.replace("with: {max_turns: 2}", "with: {max_turns: 2, prompts: prompts}"))
    (folder / "user.impatient.md").write_text("You are in a hurry. {{ scenario.brief }}\n")
    result = invoke(runner, "--estimate")
    assert result.exit_code == 0, result.output
