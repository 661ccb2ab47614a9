"""``mock/demo``, the quickstart's offline model: its run reads like a real one (policies from the
airline prompt, scenarios and dialogs in plain sentences, judgements that cite turns), its agent
passes some events and fails others, the same seed gives the same run, and every report of it
says it is a demo."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent_plugins.reporters.writers import read_report
from intellagent.llm.fabricate import WORDS

FILLER = set(WORDS)
EVENTS = 10


def run(runner, workspace: Path, model: str, events: int, seed: int = 0) -> tuple[str, dict, str]:
    result = runner.invoke(cli, ["run", "airline", "--events", str(events), "--model", model, "--seed", str(seed),
                                 "--workspace", str(workspace), "--quiet"])
    assert result.exit_code in (0, 1), result.output
    folder = next((workspace / "runs").iterdir())
    return (result.output, read_report(folder / "report.json"),
            (folder / "report.html").read_text(encoding="utf-8"))


def items(report: dict, step: str) -> list[dict]:
    return [i for i in report["items"] if i["step"] == step]


def texts(report: dict) -> list[str]:
    """Every sentence a reader of the report reads: briefs, turns, judge's reasons."""
    out = [e["value"]["brief"] for e in items(report, "events")]
    out += [t["content"] for d in items(report, "dialogs") for t in d["value"]["turns"] if t.get("content")]
    out += [j["reason"] for v in items(report, "verdicts") for j in v["value"].get("judgements", [])]
    return out


def filler_share(lines: list[str]) -> float:
    """The share of words that are the schema mock's filler words."""
    words = [w for line in lines for w in re.findall(r"[a-z]+", line.lower())]
    return sum(w in FILLER for w in words) / max(1, len(words))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from click.testing import CliRunner

    return run(CliRunner(), tmp_path_factory.mktemp("demo"), "mock/demo", EVENTS)


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    from click.testing import CliRunner

    return run(CliRunner(), tmp_path_factory.mktemp("schema"), "mock/schema", 3)


def test_the_demo_run_reads_as_sentences_where_the_schema_mock_writes_filler(demo, schema):
    _, report, _ = demo
    lines = texts(report)
    assert len(lines) > 80 and all(lines)
    _, schema_report, _ = schema
    assert filler_share(texts(schema_report)) > 0.3  # the measure sees random-word text
    assert filler_share(lines) < 0.02
    assert not any(line.startswith("Mock reply") for line in lines)
    graph = items(report, "graph")[0]["value"]
    assert any("basic economy" in p["text"].lower() for p in graph["policies"])  # read from the prompt


def test_the_demo_agent_passes_some_events_and_fails_others_for_reasons_the_judge_cites(demo):
    _, report, _ = demo
    statuses = Counter(v["status"] for v in items(report, "verdicts"))
    assert statuses["pass"] >= 3 and statuses["fail"] >= 2, statuses
    violations = [x["reason"] for v in items(report, "verdicts") for x in v["value"].get("violated", [])]
    assert violations and all(re.search(r"agent turn \d+|never|got none", r) for r in violations)
    # a tool call the agent really made
    calls = Counter(c["name"] for d in items(report, "dialogs") for t in d["value"]["turns"]
                    for c in t.get("tool_calls", []))
    assert calls["get_user_details"] >= 5 and sum(calls.values()) > calls["get_user_details"]


def test_every_report_of_a_demo_run_says_it_is_one(demo, schema):
    output, report, html = demo
    assert any("Demo run" in n for n in report["info"]["notices"])
    assert "Demo run" in output and "class=notice" in html and "Demo run" in html
    _, schema_report, schema_html = schema
    assert schema_report["info"]["notices"] == [] and "class=notice" not in schema_html


def test_a_run_where_only_some_roles_are_the_demo_says_which(runner, tmp_path, openai_server, monkeypatch):
    """The demo's notice says no model was called: false of a run whose agent called a model (here
    the local test server). It then names the roles the demo scripted and those that called a model."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    result = runner.invoke(cli, ["run", "airline", "--events", "1", "--model", "mock/demo", "--workspace",
                                 str(tmp_path / "ws"), "--set",
                                 f"llm.roles.agent={{model: gpt-4o-mini, base_url: '{openai_server.base_url}'}}"])
    assert result.exit_code in (0, 1), result.output
    assert openai_server.requests  # the agent's model was called
    notices = read_report(next((tmp_path / "ws" / "runs").iterdir()) / "report.json")["info"]["notices"]
    assert len(notices) == 1 and "no model was called" not in notices[0], notices
    assert notices[0].startswith("Partly a demo run") and "only agent called its model" in notices[0]
    assert "no model was called" not in result.output


def test_the_same_seed_gives_the_same_demo_run_and_another_seed_another(demo, runner, tmp_path):
    _, report, _ = demo
    again = run(runner, tmp_path / "a", "mock/demo", EVENTS)[1]
    other = run(runner, tmp_path / "b", "mock/demo", 3, seed=1)[1]
    assert json.dumps(again["items"], sort_keys=True) == json.dumps(report["items"], sort_keys=True)
    briefs = {e["value"]["brief"] for e in items(report, "events")}
    assert {e["value"]["brief"] for e in items(other, "events")} - briefs
