"""The commands README and the docs' pages give run as written: every `intellagent ...` line of
their bash blocks names real commands and options (click parses it), and every `run` that needs
nothing the reader makes first resolves completely — environment, pipeline, its params, models,
agent, `--set` keys, data — through `--estimate`, which calls no model and no agent. (The
examples that start an agent are run in full by tests/test_readme_agents.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.conftest import REPO, TAU_BENCH
from tests.docs_pages import fenced, pages, readme

#: What a reader makes before the command can run (a file, a folder, a run, a server's store):
#: such a command is parsed, not run.
MADE_BY_THE_READER = ("my_agent.py", "my-procedures/", "intents.txt", "my-conversations", "$PWD/ws/runs/RUN",
                      "envs/tau-retail", "path/to/", "postgresql://", "garage")
#: Environments a command names as a stand-in for the reader's own, run with a built-in one.
STAND_INS = {"ENV": "almita", "myenv": "retail"}


def commands() -> list[tuple[str, str]]:
    """(page, command line) for every `intellagent` command of a bash block (continuation lines
    joined, comments cut, a command after `&&` too), and every `intellagent run` a table row gives
    in a code span (README's pipelines)."""
    texts = {"README.md": readme(), **{f"docs/{path}": text for path, text in pages().items()}}
    found = []
    for name, text in texts.items():
        for block in fenced(text, "bash"):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split(" #")[0].split("&&"):  # the quickstart's install && run
                    part = part.strip().removeprefix(".venv/bin/")
                    if part.startswith("intellagent "):
                        found.append((name, " ".join(part.split())))
        for row in (line for line in text.splitlines() if line.startswith("|")):
            found += [(name, span) for span in re.findall(r"`(intellagent run [^`]+)`", row)
                      if "[" not in span]  # a synopsis (docs/cli.md) is not a command
    return found


COMMANDS = commands()
RUNS = [(page, line) for page, line in COMMANDS
        if line.startswith("intellagent run ") and not any(m in line for m in MADE_BY_THE_READER)]


def test_the_docs_give_commands_to_check():
    pages_with_commands = {page for page, _ in COMMANDS}
    assert {"README.md", "docs/agents.md", "docs/pipelines/tooltalk.md", "docs/scale.md"} <= pages_with_commands
    assert ("README.md", "intellagent run airline --events 30 --model mock/demo") in RUNS  # the quickstart
    assert len(RUNS) >= 18


@pytest.mark.parametrize("page,line", COMMANDS, ids=[f"{p}:{line[:60]}" for p, line in COMMANDS])
def test_every_command_parses(page, line, runner):
    """The command and each option exist (click stops at an unknown one before `--help` answers)."""
    result = runner.invoke(cli, [*shlex.split(line)[1:], "--help"])
    assert result.exit_code == 0, f"{page}: `{line}`: {result.output}"
    assert result.output.startswith("Usage: ")


@pytest.mark.parametrize("page,line", RUNS, ids=[f"{p}:{line[:60]}" for p, line in RUNS])
def test_every_run_resolves(page, line, runner, tmp_path, monkeypatch):
    args = [STAND_INS.get(a, a) for a in shlex.split(line)[1:]]
    if any("shared/datasets/tau-bench" in a for a in args) and not TAU_BENCH.is_dir():
        pytest.skip("τ-bench's data is not beside the checkout")
    monkeypatch.chdir(REPO)  # the pages' relative paths are the repository's
    # a real model's name resolves as it would for the reader; the offline guard needs it local,
    # and --estimate sends it nothing
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    result = runner.invoke(cli, [*args, "--estimate", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, f"{page}: `{line}`: {result.output}"
    assert result.output.startswith("estimate of ") and "(no model called)" in result.output
    assert not Path(tmp_path / "ws" / "intellagent.db").exists()  # an estimate makes no store
