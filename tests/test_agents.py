"""Agents under test: python (module:callable), http (the documented endpoint contract), and
openai-tools. Each returns one turn at a time; the harness runs their tool calls on the event's
database and comes back with the results."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from intellagent.cli import cli
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report


def airport_agent(messages, tools):
    """A python agent: asks for a real tool, then answers from its result."""
    assert {t["function"]["name"] for t in tools} >= {"list_all_airports"}
    if messages[-1]["role"] != "tool":
        return {"tool_calls": [{"name": "list_all_airports", "arguments": {}}]}
    airports = json.loads(messages[-1]["content"])
    return f"We serve {len(airports)} airports, San Francisco among them: {'SFO' in airports}."


def broken_agent(messages, tools):
    raise RuntimeError("the agent fell over")


def pipeline_with_agent(tmp_path: Path, agent_yaml: str) -> Path:
    text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    path = tmp_path / "pipeline.yaml"
    path.write_text(text.replace("agent: {use: openai-tools}", f"agent: {agent_yaml}"))
    return path


def report_of(tmp_path: Path) -> dict:
    return read_report(next((tmp_path / "ws").glob("runs/*/report.json")))


def values(report: dict, step: str) -> list[dict]:
    return [i["value"] for i in report["items"] if i["step"] == step]


def test_python_agent_calls_tools_on_the_event_database(runner, tmp_path):
    pipeline = pipeline_with_agent(tmp_path, "{use: python, with: {callable: 'tests.test_agents:airport_agent'}}")
    result = runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--events", "5",
                                 "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    dialogs = values(report_of(tmp_path), "dialogs")
    assert dialogs
    for d in dialogs:
        agent_turns = [t for t in d["turns"] if t["role"] == "assistant"]
        assert agent_turns and agent_turns[0]["content"] == "We serve 20 airports, San Francisco among them: True."
        call = agent_turns[0]["tool_calls"][0]
        assert call["name"] == "list_all_airports" and '"SFO": "San Francisco"' in call["output"]


def test_an_agent_that_raises_fails_its_events_not_the_run(runner, tmp_path):
    pipeline = pipeline_with_agent(tmp_path, "{use: python, with: {callable: 'tests.test_agents:broken_agent'}}")
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "4",
                                 "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    report = report_of(tmp_path)
    assert values(report, "dialogs")
    for d in values(report, "dialogs"):
        assert d["stop_reason"] == "agent-error"
        assert "RuntimeError: the agent fell over" in d["error"]
    for v in values(report, "verdicts"):
        assert v["status"] == "agent-error"  # the agent's failure, not an infra error
    assert report["metrics"]["success"]["values"]["rate"] == 0.0  # counted against the agent


def test_unknown_python_agent_is_a_clear_error(runner, tmp_path):
    pipeline = pipeline_with_agent(tmp_path, "{use: python, with: {callable: 'tests.test_agents:nobody'}}")
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                 "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 2
    assert "agent.with: python agent: 'tests.test_agents' has no 'nobody'" in result.stderr
    assert not (tmp_path / "ws").exists()  # refused before the run started


class AgentEndpoint(BaseHTTPRequestHandler):
    """The http agent contract: call a tool first, answer once the result is back."""

    requests: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        AgentEndpoint.requests.append(body)
        if body["messages"][-1]["role"] == "tool":
            reply = {"content": f"Checked: {len(json.loads(body['messages'][-1]['content']))} airports.",
                     "tool_calls": []}
        else:
            reply = {"content": None, "tool_calls": [{"id": "c1", "name": "list_all_airports", "arguments": {}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_http_agent_follows_the_documented_contract(runner, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), AgentEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/agent"
        pipeline = pipeline_with_agent(tmp_path, f"{{use: http, with: {{url: '{url}'}}}}")
        result = runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--events", "4",
                                     "--workspace", str(tmp_path / "ws")])
        assert result.exit_code == 0, result.output
    finally:
        server.shutdown()
    first = AgentEndpoint.requests[0]
    assert first["messages"][0]["role"] == "system" and "Skyward Air" in first["messages"][0]["content"]
    assert {t["function"]["name"] for t in first["tools"]} >= {"book_reservation", "list_all_airports"}
    assert any(r["messages"][-1]["role"] == "tool" for r in AgentEndpoint.requests)
    dialogs = values(report_of(tmp_path), "dialogs")
    replies = [t for d in dialogs for t in d["turns"] if t["role"] == "assistant"]
    assert replies and all(t["content"] == "Checked: 20 airports." for t in replies)
    assert all(t["tool_calls"][0]["name"] == "list_all_airports" for t in replies)
