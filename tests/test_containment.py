"""Every path an environment or a pipeline file names stays inside the folder it belongs to: code
never runs, and no file is read, from a path that climbs out (``../``, an absolute path, a
symbolic link). Each refusal is one line naming the file and line (or the flag), exit code 2, and
the code outside is never imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line, edit

EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n\ndef fn(db, customer_id):\n    return {{}}\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the environment holding code that leaves a mark when imported."""
    folder = tmp_path / "outside"
    folder.mkdir()
    marker = tmp_path / "it-ran"
    for name in ("evil.py", "validators.py", "checks.py", "loader.py"):
        (folder / name).write_text(EVIL.format(marker=str(marker)) + "\ndef load():\n    return {}\n")
    return folder


def ran(tmp_path: Path) -> bool:
    return (tmp_path / "it-ran").exists()


def tool_implementation_climbs_out(env, outside):
    edit(env / "tools.yaml", "impl.py:get_customer", "../outside/evil.py:fn")
    return "tools.yaml:4", "Python file '../outside/evil.py' points outside"


def tool_implementation_absolute(env, outside):
    edit(env / "tools.yaml", "impl.py:get_customer", f"{outside / 'evil.py'}:fn")
    return "tools.yaml:4", f"Python file '{outside / 'evil.py'}' points outside"


def tool_implementation_through_a_link(env, outside):
    (env / "lib.py").symlink_to(outside / "evil.py")
    edit(env / "tools.yaml", "impl.py:get_customer", "lib.py:fn")
    return "tools.yaml:4", "Python file 'lib.py' points outside"


def tool_implementation_in_a_linked_folder(env, outside):
    (env / "lib").symlink_to(outside)
    edit(env / "tools.yaml", "impl.py:get_customer", "lib/evil.py:fn")
    return "tools.yaml:4", "Python file 'lib/evil.py' points outside"


def tool_implementation_down_and_up(env, outside):
    (env / "sub").mkdir()
    edit(env / "tools.yaml", "impl.py:get_customer", "sub/../../outside/evil.py:fn")
    return "tools.yaml:4", "points outside"


def validators_climb_out(env, outside):
    edit(env / "environment.yaml", "validators: validators.py", "validators: ../outside/validators.py")
    return "environment.yaml:9", "validators: Python file '../outside/validators.py' points outside"


def checks_climb_out(env, outside):
    (env / "environment.yaml").write_text((env / "environment.yaml").read_text() + "checks: ../outside/checks.py\n")
    return "environment.yaml:10", "checks: Python file '../outside/checks.py' points outside"


def seed_loader_climbs_out(env, outside):
    edit(env / "environment.yaml", "  seed: data\n", "  loader: ../outside/loader.py:load\n")
    return "environment.yaml", "seed loader: Python file '../outside/loader.py' points outside"


def tools_file_climbs_out(env, outside):
    (outside / "tools.yaml").write_text((env / "tools.yaml").read_text())
    edit(env / "environment.yaml", "tools: tools.yaml", "tools: ../outside/tools.yaml")
    return "environment.yaml:8", "tools '../outside/tools.yaml' points outside the environment folder"


def schema_climbs_out(env, outside):
    (outside / "schema.yaml").write_text((env / "schema.yaml").read_text())
    edit(env / "environment.yaml", "schema: schema.yaml", "schema: ../outside/schema.yaml")
    return "environment.yaml:6", "database schema '../outside/schema.yaml' points outside"


def seed_file_climbs_out(env, outside):
    (outside / "customers.json").write_text((env / "data" / "customers.json").read_text())
    edit(env / "environment.yaml", "seed: data", "seed: {customers: ../outside/customers.json}")
    return "environment.yaml:7", "seed for 'customers' '../outside/customers.json' points outside"


def seed_folder_is_a_link_out(env, outside):
    (env / "data").rename(outside / "data")
    (env / "data").symlink_to(outside / "data")
    return "environment.yaml:7", "seed folder 'data' points outside the environment folder"


def prompt_is_a_link_out(env, outside):
    (outside / "secret.md").write_text("a secret")
    (env / "prompt.md").unlink()
    (env / "prompt.md").symlink_to(outside / "secret.md")
    return "environment.yaml:4", "prompt 'prompt.md' points outside the environment folder"


def task_climbs_out(env, outside):
    (outside / "task.md").write_text("a task")
    (env / "environment.yaml").write_text((env / "environment.yaml").read_text() + "task: ../outside/task.md\n")
    return "environment.yaml:10", "task '../outside/task.md' points outside the environment folder"


ENVIRONMENT_CASES = [tool_implementation_climbs_out, tool_implementation_absolute,
                     tool_implementation_through_a_link, tool_implementation_in_a_linked_folder,
                     tool_implementation_down_and_up, validators_climb_out, checks_climb_out,
                     seed_loader_climbs_out, tools_file_climbs_out, schema_climbs_out,
                     seed_file_climbs_out, seed_folder_is_a_link_out, prompt_is_a_link_out,
                     task_climbs_out]


@pytest.mark.parametrize("case", ENVIRONMENT_CASES, ids=lambda c: c.__name__)
def test_an_environment_names_nothing_outside_its_folder(case, shop, outside, runner, tmp_path):
    where, what = case(shop, outside)
    result = runner.invoke(cli, ["validate", str(shop)])
    assert_one_clean_line(result, where, what)
    assert not ran(tmp_path)
    result = runner.invoke(cli, ["run", str(shop), "--events", "1", "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not ran(tmp_path) and not (tmp_path / "ws").exists()


def test_a_subfolder_of_the_environment_is_inside(shop, runner):
    (shop / "lib").mkdir()
    (shop / "impl.py").rename(shop / "lib" / "impl.py")
    (shop / "tools.yaml").write_text((shop / "tools.yaml").read_text().replace("impl.py:", "lib/impl.py:"))
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 0, result.output


PIPELINE = """\
llm: {default: {model: mock/schema}}
steps:
  graph: {use: policy-graph, with: {prompts: PROMPTS}}
"""


def test_a_pipeline_file_names_no_folder_outside_the_current_one(runner, tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "mine").mkdir(parents=True)
    (tmp_path / "theirs").mkdir()
    monkeypatch.chdir(work)
    for value in ("../theirs", str(tmp_path / "theirs")):
        (work / "p.yaml").write_text(PIPELINE.replace("PROMPTS", value))
        result = runner.invoke(cli, ["run", "education", "--pipeline", "p.yaml", "--workspace", "ws"])
        assert_one_clean_line(result, "p.yaml:3", f"steps.graph.with.prompts: prompts folder '{value}' "
                              "points outside the current folder")
        assert not (work / "ws").exists()
    (work / "p.yaml").write_text(PIPELINE.replace("PROMPTS", "mine"))
    result = runner.invoke(cli, ["run", "education", "--pipeline", "p.yaml", "--workspace", "ws"])
    assert result.exit_code == 0, result.output


def test_a_path_given_on_the_command_line_may_be_anywhere(runner, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "theirs").mkdir()
    monkeypatch.chdir(work)
    (work / "p.yaml").write_text(PIPELINE.replace("PROMPTS", "nowhere"))
    result = runner.invoke(cli, ["run", "education", "--pipeline", "p.yaml", "--workspace", "ws",
                                 "--set", f"steps.graph.with.prompts={tmp_path / 'theirs'}"])
    assert result.exit_code == 0, result.output
    # and a flag's missing folder is blamed on the flag
    result = runner.invoke(cli, ["run", "education", "--pipeline", "p.yaml", "--workspace", "ws",
                                 "--set", "steps.graph.with.prompts=../missing"])
    assert_one_clean_line(result, "--set steps.graph.with.prompts", "prompts folder '../missing' not found")


@pytest.mark.parametrize("tasks", ["../../../../etc/passwd", "/etc/passwd"])
def test_a_task_file_a_pipeline_file_names_stays_inside(tasks, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(
        "agent: {use: tau-bench/oracle}\nsteps:\n"
        f"  tasks: {{use: tau-bench/tasks, with: {{tasks: '{tasks}'}}}}\n")
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "p.yaml", "--workspace", "ws"])
    assert_one_clean_line(result, "p.yaml:3", f"τ-bench task file '{tasks}' points outside the current folder")


@pytest.mark.parametrize("setting", [
    "agent={use: python, with: {callable: '../outside/evil.py:fn'}}",
    "llm.default={model: mock/function, options: {function: '../outside/evil.py:fn'}}",
], ids=["python-agent", "function-model"])
def test_code_a_pipeline_names_runs_only_from_the_current_folder(setting, outside, runner, tmp_path,
                                                                 monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = runner.invoke(cli, ["run", "education", "--events", "1", "--workspace", "ws", "--set", setting])
    assert_one_clean_line(result, "", "Python file '../outside/evil.py' points outside")
    assert not ran(tmp_path)
