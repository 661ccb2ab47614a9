"""Real OpenAI-compatible servers differ: the local test server imitates their quirks, and each
structured-output mode, the auto probe, the message format, repeated server errors, per-item
degradation and the tool-calls-as-text warning are checked against it."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, Field

from intellagent.cli import cli
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.openai_server import OpenAIServer
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report


class Answer(BaseModel):
    score: int = Field(ge=0, le=10)
    why: str


def ask(server: OpenAIServer, mode: str, **settings):
    llm = LLM(LLMSettings(default=ModelSettings(model="m", base_url=server.base_url, structured=mode),
                          backoff_base=0.01, **settings))

    async def go():
        try:
            return await llm.structured([{"role": "user", "content": "rate it"}], Answer)
        finally:
            await llm.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("quirk,works,fails", [
    ("ignore-tool-choice", ["json_schema", "json"], ["tools"]),   # llama-server
    ("json-schema-500", ["tools", "json"], ["json_schema"]),      # llama_cpp.server
    (None, ["tools", "json_schema", "json"], []),
])
def test_each_structured_mode_against_each_kind_of_server(quirk, works, fails):
    for mode in works + fails:
        with OpenAIServer(quirks=[quirk] if quirk else []) as server:
            out = ask(server, mode, max_retries=1)
            assert out.ok == (mode in works), (quirk, mode, out.error)
            sent = server.requests[0]
            if mode == "tools":
                assert sent["tool_choice"]["function"]["name"] == "Answer"
            elif mode == "json_schema":
                assert sent["response_format"]["type"] == "json_schema"
            else:
                assert sent["response_format"] == {"type": "json_object"}
                assert '"score"' in sent["messages"][0]["content"]  # the schema goes in the prompt


@pytest.mark.parametrize("quirk,mode", [("ignore-tool-choice", "json_schema"), ("json-schema-500", "tools")])
def test_auto_probes_once_and_keeps_the_mode_that_works(quirk, mode):
    with OpenAIServer(quirks=[quirk]) as server:
        llm = LLM(LLMSettings(default=ModelSettings(model="m", base_url=server.base_url), backoff_base=0.01))

        async def go():
            try:
                return [await llm.structured([{"role": "user", "content": f"rate {i}"}], Answer)
                        for i in range(3)]
            finally:
                await llm.aclose()
        outcomes = asyncio.run(go())
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        provider = next(iter(llm._providers.values()))
        assert provider.mode == mode
        probes = [r for r in server.requests if "Answer with ok set to true" in json.dumps(r["messages"])]
        assert len(server.requests) - len(probes) == 3 and len(probes) <= 2  # probed once, then kept


def test_no_mode_at_all_says_so():
    with OpenAIServer(quirks=["ignore-tool-choice", "json-schema-500"], responder=lambda r: {
            "role": "assistant", "content": "I do not do JSON."}) as server:
        out = ask(server, "auto", max_retries=0)
    assert not out.ok and "no structured-output mode works at" in out.error
    assert "set `structured:`" in out.error


def test_a_500_that_repeats_is_retried_as_configured_and_reported_with_the_servers_message():
    """Identical 500 bodies are also what a passing fault gives: they never cut the configured
    retries (the call's deadline bounds them); the error then says the server may reject it."""
    with OpenAIServer(quirks=["json-schema-500"]) as server:
        out = ask(server, "json_schema", max_retries=5)
    assert not out.ok
    assert "answered this request the same way 6 times" in out.error
    assert "json_schema response format is not supported" in out.error
    assert len(server.requests) == 6 and out.attempts == 6


def test_assistant_turns_with_tool_calls_are_sent_with_string_content(runner, tmp_path):
    """llama_cpp.server answers 500 to content: null; a whole dialog with tool calls must pass."""
    with OpenAIServer(quirks=["reject-null-content"]) as server:
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
            "default: {model: mock/schema}",
            f"default: {{model: mock/schema}}\n  roles: {{agent: {{model: m, base_url: '{server.base_url}'}}}}"))
        result = runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--events", "6",
                                     "--workspace", str(tmp_path / "ws")])
        assert result.exit_code == 0, result.output
        with_calls = [r for r in server.requests
                      if any(m.get("tool_calls") for m in r["messages"] if m["role"] == "assistant")]
        assert with_calls  # the agent did call tools, and its tool-call turns went back to the server
        assert all(m["content"] is not None for r in server.requests for m in r["messages"])
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    assert not any(i["status"] == "infra-error" for i in report["items"])


def test_an_agent_that_writes_tool_calls_as_text_is_flagged_not_passed_silently(runner, tmp_path):
    from intellagent.session import tool_call_in_text

    names = {"get_user_details", "book_reservation"}
    assert tool_call_in_text('```json\n{"name": "get_user_details", "arguments": {"user_id": "x"}}\n```', names)
    assert tool_call_in_text('<tool_call>{"name": "book_reservation", "parameters": {}}</tool_call>', names)
    assert not tool_call_in_text('Your booking {"ref": "ZFA04Y"} is confirmed.', names)
    assert not tool_call_in_text('{"name": "Ana", "arguments": "none"}', names)
    # a record whose name is an object (τ-bench's users) in a reply: not a call, and no crash
    assert not tool_call_in_text('On file: {"name": {"first_name": "Ana"}, "arguments": 1}', names)

    with OpenAIServer(quirks=["tools-as-text"]) as server:
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
            "default: {model: mock/schema}",
            f"default: {{model: mock/schema}}\n  roles: {{agent: {{model: m, base_url: '{server.base_url}'}}}}"))
        result = runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--events", "6",
                                     "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stdout and "wrote tool calls as text" in result.stdout
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    dialogs = [s for s in report["steps"] if s["name"] == "dialogs"][0]
    flagged = sum(dialogs["warnings"].values())
    assert flagged and all(not t["tool_calls"] for i in report["items"] if i["step"] == "dialogs"
                           for t in i["value"]["turns"] if t["role"] == "assistant")
    html = next((tmp_path / "ws").glob("runs/*/report.html")).read_text()
    assert "id=warnings" in html and "wrote tool calls as text" in html


def test_queue_time_is_recorded_apart_from_request_time(runner, tmp_path):
    import sqlite3

    from intellagent.store import Store

    with OpenAIServer(latency=0.2) as server:
        store = Store.for_workspace(tmp_path)
        llm = LLM(LLMSettings(default=ModelSettings(model="m", base_url=server.base_url, structured="tools"),
                              max_concurrency=1), store=store, run_id=store.start_run())

        async def go():
            try:
                return await asyncio.gather(*[llm.chat([{"role": "user", "content": f"q{i}"}]) for i in range(4)])
            finally:
                await llm.aclose()
        asyncio.run(go())
    with sqlite3.connect(tmp_path / "intellagent.db") as conn:
        rows = conn.execute("SELECT latency_ms, queue_ms FROM llm_calls ORDER BY queue_ms").fetchall()
    assert len(rows) == 4
    assert all(latency > 190 for latency, _ in rows)
    assert all(latency < 600 for latency, _ in rows[1:])  # a queued request is still only ~0.2 s
    assert rows[0][1] < 50 and rows[-1][1] > 500  # the last one waited behind three others
    out = runner.invoke(cli, ["cost", "--workspace", str(tmp_path)]).stdout
    assert "request s" in out and "queued s" in out


def test_transient_faults_during_the_probe_are_not_taken_for_a_missing_mode():
    with OpenAIServer(faults=["429", "503", "malformed", "500"]) as server:
        out = ask(server, "auto", max_retries=2)
        assert out.ok, out.error
        assert not any("response_format" in r for r in server.requests)  # never gave up on tools
        assert sum("Answer with ok set to true" in json.dumps(r["messages"]) for r in server.requests) == 5
