"""The CLI on the built-in plugins."""

from __future__ import annotations

import re

import click

from intellagent import hookimpl
from intellagent.cli import cli
from tests.conftest import REPO, TAU_BENCH


def test_envs_lists_the_builtin_environments(runner):
    result = runner.invoke(cli, ["envs"])
    assert result.exit_code == 0
    for name in ("airline", "retail", "education"):
        assert re.search(rf"^intellagent/{name} +intellagent 0\.1\.0 ", result.output, re.M), result.output


def test_plugins_lists_distribution_hooks_and_names(runner):
    result = runner.invoke(cli, ["plugins"])
    assert result.exit_code == 0
    assert "intellagent 0.1.0  intellagent:environments" in result.output
    assert "hooks: register_environments" in result.output
    assert "registers environment intellagent/airline" in result.output
    assert "registers env-template intellagent/environment" in result.output


def test_validate_builtin_environments(runner):
    for name, summary in [("airline", "14 tools, 3 tables, 4 validators, 10 rule checks"),
                          ("retail", "16 tools, 3 tables, 4 validators, 5 rule checks"),
                          ("education", "0 tools, 0 validators")]:
        result = runner.invoke(cli, ["validate", name])
        assert result.exit_code == 0, result.output
        assert result.output.strip() == f"ok: {name} 0.1.0 ({summary})"


def test_validate_with_tau_bench_data(runner):
    result = runner.invoke(cli, ["validate", "airline", "--data", str(TAU_BENCH / "airline")])
    assert result.exit_code == 0, result.output


def test_validate_by_folder(runner):
    result = runner.invoke(cli, ["validate", str(REPO / "environments" / "retail" / "environment.yaml")])
    assert result.exit_code == 0, result.output


def test_plugin_commands_join_the_cli(runner):
    import types

    @click.command("hello")
    def hello():
        """Say hello."""
        click.echo("hello from a plugin")

    plugin = types.ModuleType("greeter")
    plugin.register_commands = hookimpl(lambda register: register(hello))
    obj = {"plugins": (plugin,), "entry_points": False}
    assert "hello" in runner.invoke(cli, ["--help"], obj=obj).output
    result = runner.invoke(cli, ["hello"], obj=obj)
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"


def test_schemas_check(runner, tmp_path):
    assert runner.invoke(cli, ["schemas", "--check", "--out", str(REPO / "schemas")]).exit_code == 0
    assert runner.invoke(cli, ["schemas", "--check", "--out", str(tmp_path)]).exit_code == 1
    assert runner.invoke(cli, ["schemas", "--out", str(tmp_path)]).exit_code == 0
    assert runner.invoke(cli, ["schemas", "--check", "--out", str(tmp_path)]).exit_code == 0
