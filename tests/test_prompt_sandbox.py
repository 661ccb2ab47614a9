"""Prompt files render in Jinja2's sandbox: a user's prompt file cannot run code (it is refused in
one line naming the file and line, exit 2, before any model call, and nothing it asked for runs),
and every built-in prompt renders exactly as it did outside the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent.prompts import PromptFiles
from tests.conftest import REPO
from tests.test_bad_input import assert_one_clean_line

ESCAPES = {
    "globals": ("{{ cycler.__init__.__globals__.os.system('touch MARK') }}", "'__globals__'"),
    "class-walk": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "'__subclasses__'"),
    "attr-filter": ("{{ lipsum | attr('__globals__') }}", "'__globals__'"),
    "item": ("{{ self['_TemplateReference__context'] }}", "'_TemplateReference__context'"),
    "mro": ("{{ ''.__class__.mro() }}", "'mro'"),
    "frame": ("{% for x in range(1) %}{{ loop.gi_frame }}{% endfor %}", "'gi_frame'"),
}


def pipeline(tmp_path: Path, prompts: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text("llm: {default: {model: mock/schema}}\nsteps:\n"
                    f"  graph: {{use: policy-graph, with: {{prompts: '{prompts}'}}}}\n")
    return path


def run_with_prompt(runner, tmp_path: Path, name: str, text: str):
    """``intellagent run education`` with the user's prompt file ``name`` holding ``text``."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / name).write_text(text)
    return runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline(tmp_path, Path("prompts"))),
                               "--workspace", "ws"])


@pytest.mark.parametrize("name", list(ESCAPES))
def test_a_prompt_file_that_reaches_for_python_is_refused(name, runner, tmp_path, monkeypatch):
    template, attribute = ESCAPES[name]
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "flows.md", "Find the flows.\n\n" + template + "\n")
    assert_one_clean_line(result, "prompts/flows.md:3", f"prompt file uses {attribute}: templates may "
                          "not reach Python's internals")
    assert not (tmp_path / "MARK").exists() and not (tmp_path / "ws").exists()


def test_what_the_static_check_cannot_see_the_sandbox_stops(runner, tmp_path, monkeypatch):
    """An attribute name built at render time: the sandbox refuses it, naming the file."""
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "task_and_flows.md",
                             "{% set name = '_' ~ '_init__' %}{{ cycler | attr(name) }}\n")
    assert_one_clean_line(result, "prompts/task_and_flows.md", "prompt file refused by the sandbox")


BOMBS = {
    "repeat": ("{{ 'x' * 10**10 }}", "'*' would make 10,000,000,000 characters"),
    "power": ("{{ 7 ** 100000000 }}", "'**' would make a number of more than 4,300 digits"),
    "doubling": ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                 "{% endfor %}{{ ns.s }}", "'~' would make 1,048,576 characters"),
    "adding": ("{% set ns = namespace(s=['x']) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
               "{% endfor %}{{ ns.s }}", "'+' would make 1,048,576 characters"),
    "filter": ("{{ 'x' | center(10**10) }}", "'center' would make 10,000,000,000 characters"),
    "method": ("{{ 'x'.ljust(10**10) }}", "'ljust' would make 10,000,000,000 characters"),
    "range": ("{% for i in range(10**9) %}{% endfor %}", "Range too big"),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_prompt_file_that_would_fill_the_memory_is_stopped_naming_it(name, runner, tmp_path, monkeypatch):
    """The sandbox bounds range() alone: each of these took gigabytes (or hours) before the
    prompt's size could be checked."""
    template, what = BOMBS[name]
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "task_and_flows.md", "Find the flows.\n" + template + "\n")
    assert_one_clean_line(result, "prompts/task_and_flows.md", f"prompt file refused by the sandbox: {what}")


@pytest.mark.parametrize("text,where,what", [
    ("", "prompts/flows.md", "prompt file is empty"),
    (" \n\n", "prompts/flows.md", "prompt file is empty"),
    ("Flows of {{ task }\n", "prompts/flows.md:1", "invalid template: unexpected '}'"),
    ("{% for x in y %}\nno end\n", "prompts/flows.md:", "invalid template: Unexpected end of template"),
], ids=["empty", "blank", "syntax", "unclosed"])
def test_a_prompt_file_that_is_no_template_is_refused(text, where, what, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "flows.md", text)
    assert_one_clean_line(result, where, what)


def test_a_prompt_file_whose_macro_calls_itself_without_end_names_the_file(runner, tmp_path, monkeypatch):
    """It ended the run with 'internal error: RecursionError' (exit 3)."""
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "task_and_flows.md",
                             "Find the flows.\n{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}\n")
    assert_one_clean_line(result, "prompts/task_and_flows.md", "prompt file failed to render: a macro calls "
                          "itself without end")


def test_a_prompt_file_naming_a_value_the_step_does_not_give_names_the_file(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_with_prompt(runner, tmp_path, "task_and_flows.md", "The flows of {{ no_such_value }}.\n")
    assert_one_clean_line(result, "prompts/task_and_flows.md", "prompt file failed to render: "
                          "'no_such_value' is undefined")


BUILT_IN = {(folder.parent.name, p.name) for folder in (REPO / "plugins").glob("*/prompts")
            for p in folder.iterdir() if p.is_file()}
#: Rendered only on paths these runs do not take (a blueprint revised, two different user
#: candidates to judge, a conversation whose every call worked); the tests of those paths render
#: them, under the same comparison (conftest.py).
ELSEWHERE = {("apigen_mt", "revise.md"), ("apigen_mt", "user_judge.md"), ("tooltalk", "replies.md")}
FUNCTION = "--set llm.default.model=mock/function --set llm.default.options.function=tests."
RUNS = [
    "SHOP --events 3",
    "airline --events 2 --set steps.graph.with.edges=pairwise",
    f"retail --pipeline apigen-mt --agent tau-bench/oracle {FUNCTION}test_apigen_mt:fake_model --blueprints 8 "
    "--trials 2 --pairs 2 --set steps.contexts.with.user_pool=2 --set steps.dialogs.with.candidates=2",
    f"tooltalk --pipeline tooltalk-generate {FUNCTION}tooltalk_writer:reply --requests 2",
    f"almita --pipeline almita {FUNCTION}almita_script:answer --paths 1",
    "almita --pipeline almita --count 1 --set steps.intents.with.environment_procedures=false",
]
WITH_A_TASK = """\
from intellagent.environment import ValidationFailed, database_validator


@database_validator
def no_new_rows(db):
    if db.count("customers") > 2 or db.count("orders") > 2:
        raise ValidationFailed("make no new rows")
"""


def test_the_built_in_prompts_render_as_they_did_outside_the_sandbox(shop, runner, tmp_path):
    """Runs that render almost every built-in prompt; each rendering is compared with a plain
    Jinja2 environment's by conftest.py's fixture. The shop has a task (flows.md) and refuses new
    rows (repair.md)."""
    (shop / "task.md").write_text("Help customers with their credit.\n")
    (shop / "environment.yaml").write_text((shop / "environment.yaml").read_text() + "task: task.md\n")
    (shop / "validators.py").write_text(WITH_A_TASK)
    rendered: set[tuple[str, str]] = set()
    compared = PromptFiles.render

    def render(self: PromptFiles, name: str, **values):
        rendered.add((self.file(name).parent.parent.name, name))
        return compared(self, name, **values)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PromptFiles, "render", render)
        for i, args in enumerate(RUNS):
            result = runner.invoke(cli, ["run", *args.replace("SHOP", str(shop)).split(),
                                         "--workspace", str(tmp_path / f"ws{i}")])
            # a run whose mock answers leave items unfinished exits 3: it rendered all the same
            assert result.exit_code in (0, 3), (args, result.output)
    assert BUILT_IN - ELSEWHERE <= rendered, sorted(BUILT_IN - ELSEWHERE - rendered)
