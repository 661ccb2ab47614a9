"""The docs' "Testing the tests" page (docs/testing-the-tests.md): its commands run as written (τ-bench's data path pointed at the
shared datasets, each in a fresh folder) and print what README shows, run ids aside. Lines
README shortens with "…" are left out; every other line must be there."""

from __future__ import annotations

import json
import re
import shlex
import types
from pathlib import Path

import pytest

from intellagent.cli import cli
from tests.conftest import REPO, TAU_BENCH

RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
NEEDS_TAU = pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")


def section() -> str:
    return (REPO / "docs" / "testing-the-tests.md").read_text(encoding="utf-8")


def part(title: str) -> str:
    """The subsection whose heading starts with ``title``."""
    text = section()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 3)
    return text[start:end if end > 0 else None]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def commands(block: str) -> list[list[str]]:
    """The ``intellagent`` commands of a bash block, continuation lines joined, the data path
    pointed at the shared datasets."""
    joined = block.replace("\\\n", " ").replace("../shared/datasets/tau-bench", str(TAU_BENCH))
    return [shlex.split(line, comments=True)[1:] for line in joined.splitlines() if line.startswith("intellagent ")]


def shown(block: str) -> list[str]:
    """The lines README shows of an output, run ids masked, shortened lines ("…") left out."""
    return [RUN_ID.sub("RUN", line) for line in block.splitlines() if line.strip() and "…" not in line]


def invoke(runner, args: list[str], plugins=()):
    result = runner.invoke(cli, args, obj={"plugins": plugins} if plugins else None)
    assert result.exit_code == 0, (args, result.output)
    return result


def assert_prints(result, block: str) -> None:
    printed = RUN_ID.sub("RUN", result.stdout).splitlines()
    missing = [line for line in shown(block) if line not in printed]
    assert not missing, "README shows what the command does not print:\n" + "\n".join(missing)


@NEEDS_TAU
def test_the_mutate_example_prints_what_readme_shows(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = part("Mutants")
    [plain, as_json] = [c for b in blocks(text, "bash") for c in commands(b)]
    [terminal, json_shown, *_] = blocks(text, "text")
    assert sum(": killed " in line for line in shown(terminal)) == 5  # every built-in mutant
    assert_prints(invoke(runner, plain), terminal)
    found = json.loads(invoke(runner, as_json).stdout)
    assert set(found) == set(re.findall(r'"([\w-]+)": \{"killed"', json_shown))
    checked = 0
    for name, body in re.findall(r'"([\w-]+)": \{("killed".*?)(?=\n "[\w-]+": \{"killed"|$)', json_shown, flags=re.S):
        key = re.compile(r'"(\w+)": ')
        at = 0
        while found_key := key.search(body, at):
            try:
                value, at = json.JSONDecoder().raw_decode(body, found_key.end())
            except json.JSONDecodeError:  # a list README shortens: [..., …]
                at = found_key.end()
                continue
            if "…" not in json.dumps(value, ensure_ascii=False):
                assert found[name][found_key.group(1)] == value, (name, found_key.group(1))
                checked += 1
    assert checked >= 10


def load_module(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"{name}.py", "exec"), module.__dict__)
    return module


@NEEDS_TAU
def test_the_mutant_plugin_example_runs_as_written(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = part("Mutants")
    [code] = blocks(text, "python")
    plugin = load_module(code, "acme_mutants")
    [command] = [c for c in re.findall(r"`(intellagent mutate [^`]+)`", text.replace("\n", " "))
                 if "acme/shout" in c]
    result = invoke(runner, commands(command)[0], plugins=(plugin,))
    assert "acme/shout: killed 0 of 20 passing item(s)" in result.stdout  # "kills no task"
    writing = (REPO / "docs" / "writing" / "plugin.md").read_text(encoding="utf-8")
    assert "`register_mutants`" in writing  # listed with the other hooks


def test_the_calibration_example_prints_what_readme_shows(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = part("Judge calibration")
    [run_and_label, labelled, several] = blocks(text, "bash")
    [terminal, people] = blocks(text, "text")
    for args in commands(run_and_label):
        invoke(runner, args)
    [page] = Path("calibration").glob("runs/*/label.html")
    heredoc = re.search(r"cat > (\S+) <<'(\w+)'\n(.*?)\n\2\n", labelled, flags=re.S)
    Path(heredoc.group(1)).write_text(heredoc.group(3) + "\n")
    questions = set(re.findall(r"data-id='([^']+)'", page.read_text()))
    for row in heredoc.group(3).splitlines()[1:]:  # every label answers a question of the page
        item, policy, _ = row.split(",")
        assert (f"{item}|policy|{policy}" if policy else f"{item}|") in questions, row
    [calibrate] = commands(labelled)
    assert_prints(invoke(runner, calibrate), terminal)
    report = json.loads(next(Path("calibration").glob("runs/*/report.json")).read_text())
    assert report["calibration"]["overall"]["n"] == len(heredoc.group(3).splitlines()) - 1
    assert "id=calibration" in next(Path("calibration").glob("runs/*/report.html")).read_text()
    # several labellers: the second file beside the first
    heredoc = re.search(r"cat > (\S+) <<'(\w+)'\n(.*?)\n\2\n", several, flags=re.S)
    Path(heredoc.group(1)).write_text(heredoc.group(3) + "\n")
    [calibrate] = commands(several)
    assert_prints(invoke(runner, calibrate), people)
    assert len(shown(people)) == 3  # the first line, the tie, the people's line


@NEEDS_TAU
def test_the_replay_example_prints_what_readme_shows_and_compare_shows_it_too(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = part("Replay")
    [block] = blocks(text, "bash")
    [terminal] = blocks(text, "text")
    record, replay = commands(block)
    invoke(runner, record)
    result = invoke(runner, replay)
    assert_prints(result, terminal)
    compare_line = result.stdout.strip().splitlines()[-1]
    assert compare_line.startswith("compare: intellagent compare ")
    compared = invoke(runner, shlex.split(compare_line)[2:] + ["--workspace", "replays"])
    per_dialog = [line for line in shown(terminal) if line.startswith("  T0")]
    assert per_dialog and all(line in RUN_ID.sub("RUN", compared.stdout).splitlines() for line in per_dialog)
