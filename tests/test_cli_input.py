"""Every command answers bad input on its command line in one line and exit code 2: click's own
usage errors (a value out of range, an unknown command or choice), a path that cannot be
written, an empty name, a URL that is none, a model whose key is missing (before anything is
made, naming the role and the flag)."""

from __future__ import annotations

import pytest

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line


@pytest.fixture
def workspace(runner, tmp_path):
    ws = tmp_path / "ws"
    assert runner.invoke(cli, ["run", "education", "--events", "1", "--workspace", str(ws)]).exit_code == 0
    return ws


def test_click_usage_errors_are_one_line(runner, workspace, tmp_path):
    result = runner.invoke(cli, ["compare", "latest", "--changes", "-1", "--workspace", str(workspace)])
    assert_one_clean_line(result, "compare: ", "Invalid value for '--changes': -1 is not in the range")
    result = runner.invoke(cli, ["import", "tau-bench", str(tmp_path), "--domain", "moon"])
    assert_one_clean_line(result, "import tau-bench: ", "Invalid value for '--domain': 'moon' is not one of")
    assert_one_clean_line(runner.invoke(cli, ["nosuch"]), ": ", "No such command 'nosuch'")
    assert_one_clean_line(runner.invoke(cli, ["run"]), "run: ", "Missing argument 'ENVIRONMENT'")
    assert_one_clean_line(runner.invoke(cli, ["cost", "--workspace"]), "error: ",
                          "Option '--workspace' requires an argument")


def test_a_path_that_cannot_be_written_names_itself(runner, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_one_clean_line(runner.invoke(cli, ["new-env", "garage", "--dir", str(afile)]), "afile", "Not a directory")
    assert_one_clean_line(runner.invoke(cli, ["schemas", "--out", str(afile)]), "afile", "File exists")


@pytest.mark.parametrize("flags,flag,what", [
    (["--executor", ""], "--executor", "executor.use: no executor named ''"),
    (["--ray-address", "nonsense"], "--ray-address", "'nonsense' is not a Ray address"),
    (["--agent", "http", "--set", "agent.with.url=localhost:8000/turn"], "--set agent.with.url",
     "'localhost:8000/turn' is not an http:// or https:// URL with a host"),
    (["--set", "llm.default.base_url=ftp://x/v1"], "--set llm.default.base_url",
     "'ftp://x/v1' is not an http:// or https:// URL"),
    (["--model", "gpt-4o"], "--model", "llm.default.model: role agent: model 'gpt-4o' at the OpenAI API is "
     "not local and INTELLAGENT_OFFLINE is set"),
    (["--set", "llm.roles.critic.model=gpt-4o"], "--set llm.roles.critic.model", "role critic: model 'gpt-4o'"),
    (["--set", "llm.default.base_url=http://u:pw-123456@127.0.0.1:9/v1"], "--set llm.default.base_url",
     "holds a password: secrets are not accepted in a URL"),
    (["--set", "llm.default.base_url=https://host.example/v1?alt=json&key=AIza-123456"], "--set llm.default.base_url",
     "holds 'key=': secrets are not accepted in a URL"),
    (["--agent", "http", "--set", "agent.with.url=https://bob:hunter2@x.example/chat"], "--set agent.with.url",
     "holds a password: secrets are not accepted in a URL"),
    (["--agent", "a2a", "--set", "agent.with.url=https://bob:hunter2@x.example/"], "--set agent.with.url",
     "holds a password: secrets are not accepted in a URL"),
], ids=["executor", "ray-address", "agent-url", "base-url", "model", "role", "base-url-password", "base-url-key",
        "agent-url-password", "a2a-url-password"])
def test_a_run_flag_naming_nothing_usable_is_refused_before_anything_is_made(flags, flag, what, runner, tmp_path):
    result = runner.invoke(cli, ["run", "education", "--workspace", str(tmp_path / "ws"), *flags])
    assert_one_clean_line(result, f"error: {flag}: ", what)
    assert not (tmp_path / "ws").exists()


def test_a_missing_api_key_stops_the_run_before_it_starts(runner, tmp_path, monkeypatch):
    """Not at the first call of the role that needs it, after the other steps' work."""
    monkeypatch.delenv("INTELLAGENT_OFFLINE")
    monkeypatch.delenv("MY_CRITIC_KEY", raising=False)
    result = runner.invoke(cli, ["run", "education", "--workspace", str(tmp_path / "ws"), "--set",
                                 "llm.roles.critic={model: gpt-4o, api_key_env: MY_CRITIC_KEY}"])
    assert_one_clean_line(result, "error: --set llm.roles.critic: ", "role critic: no API key for model "
                          "'gpt-4o': set MY_CRITIC_KEY")
    assert not (tmp_path / "ws").exists()


def test_report_format_must_name_some_reporter(runner, workspace):
    result = runner.invoke(cli, ["report", "--format", " , ", "--workspace", str(workspace)])
    assert_one_clean_line(result, "--format", "names no reporter (reporters: ")


@pytest.mark.parametrize("args,where,what", [
    (["run", "education", "--progress-every", "nan"], "Invalid value for '--progress-every'",
     "'nan' is not a number of seconds"),
    (["mutate", "education", "--mutants", ""], "--mutants", "no mutant name given"),
    (["mutate", "education", "--mutants", " , "], "--mutants", "no mutant name given"),
], ids=["progress-every-nan", "mutants-empty", "mutants-commas"])
def test_a_value_that_used_to_pass_for_a_default_is_refused(args, where, what, runner, tmp_path):
    """NaN slipped past click's range (every comparison with it is false); an empty --mutants ran
    every mutant, as if the flag were not given (a mutant named twice runs once: test_mutants)."""
    result = runner.invoke(cli, [*args, "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, where, what)
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("command", [["run", "education", "--events", "1"], ["cost"], ["store", "check"]])
def test_a_store_url_on_no_database_we_keep_a_store_on_names_where_it_came_from(command, runner, tmp_path,
                                                                               monkeypatch):
    """It said 'store: not a store URL: Can't load plugin: sqlalchemy.dialects:nosuch', and for
    mysql:// to pip install intellagent[postgres], naming neither the flag nor the variable."""
    ws = ["--workspace", str(tmp_path / "ws")]
    result = runner.invoke(cli, [*command, *ws, "--store", "nosuch://host/db"])
    assert_one_clean_line(result, "error: --store: ", "a store is on SQLite or PostgreSQL, not nosuch")
    result = runner.invoke(cli, [*command, *ws, "--store", "::::"])
    assert_one_clean_line(result, "error: --store: ", "not a store URL (expected sqlite:///FILE or postgresql://")
    monkeypatch.setenv("INTELLAGENT_STORE", "mysql://me@host/db")
    result = runner.invoke(cli, [*command, *ws])
    assert_one_clean_line(result, "error: INTELLAGENT_STORE: ", "a store is on SQLite or PostgreSQL, not mysql")
    assert not (tmp_path / "ws").exists()
