"""The README stays true: CI runs its test command verbatim, and the docs' CLI reference lists
every command (docs/cli.md's table; its help sections are generated, tests/test_docs.py)."""

from __future__ import annotations

import re

from intellagent.cli import cli
from tests.conftest import REPO
from tests.docs_pages import page, section

README = (REPO / "README.md").read_text()


def _test_command() -> str:
    block = README.split("<!-- test-command -->", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", block, re.S).group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert _test_command() in ci


def test_ci_then_runs_the_fast_part_on_the_lowest_versions_pyproject_allows():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    after = ci[ci.index(_test_command()) + 1:]
    assert any("--resolution lowest-direct" in line and "-e '.[test]'" in line for line in after)
    assert any(line.endswith('pytest -q -m "not slow"') for line in after)
    assert '-m "not slow"' in README  # the fast part is documented


def test_every_cli_command_is_in_the_reference(runner):
    reference = section(page("cli.md"), "## Commands at a glance")
    result = runner.invoke(cli, ["--help"])
    listing = result.output.split("Commands:", 1)[1]
    commands = re.findall(r"^  (\S+)", listing, re.M)
    assert commands
    for name in commands:
        assert f"`intellagent {name}" in reference, f"docs/cli.md's table lacks `{name}`"
