"""Agents under test: python (module:callable), http (the documented endpoint contract), and
openai-tools, each driving the environment's tools on the event's database."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from intellagent.cli import cli
from tests.conftest import REPO


def airport_agent(messages, toolbox):
    """A python agent: looks the airports up with a real tool, then answers."""
    record = toolbox.call("list_all_airports", {})
    airports = json.loads(record.output)
    return f"We serve {len(airports)} airports, San Francisco among them: {'SFO' in airports}."


def broken_agent(messages, toolbox):
    raise RuntimeError("the agent fell over")


def pipeline_with_agent(tmp_path: Path, agent_yaml: str) -> Path:
    text = (REPO / "plugins" / "pipelines" / "intellagent.yaml").read_text()
    path = tmp_path / "pipeline.yaml"
    path.write_text(text.replace("agent: {use: openai-tools}", f"agent: {agent_yaml}"))
    return path


def report_of(tmp_path: Path) -> dict:
    return json.loads(next((tmp_path / "ws").glob("runs/*/report.json")).read_text())


def test_python_agent_calls_tools_on_the_event_database(runner, tmp_path):
    pipeline = pipeline_with_agent(tmp_path, "{use: python, with: {callable: 'tests.test_agents:airport_agent'}}")
    result = runner.invoke(cli, ["run", "airline", "--pipeline", str(pipeline), "--events", "5",
                                 "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    dialogs = [r["dialog"] for r in report_of(tmp_path)["results"] if r["dialog"]]
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
    for r in report["results"]:
        if r["dialog"]:
            assert r["dialog"]["stop_reason"] == "agent-error"
            assert "RuntimeError: the agent fell over" in r["dialog"]["error"]
            assert r["verdict"]["status"] == "fail"  # the agent's failure, not an infra error


def test_unknown_python_agent_is_a_clear_error(runner, tmp_path):
    pipeline = pipeline_with_agent(tmp_path, "{use: python, with: {callable: 'tests.test_agents:nobody'}}")
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                 "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 2
    assert "python agent: 'tests.test_agents' has no 'nobody'" in result.stderr


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
    dialogs = [r["dialog"] for r in report_of(tmp_path)["results"] if r["dialog"]]
    replies = [t for d in dialogs for t in d["turns"] if t["role"] == "assistant"]
    assert replies and all(t["content"] == "Checked: 20 airports." for t in replies)
    assert all(t["tool_calls"][0]["name"] == "list_all_airports" for t in replies)
