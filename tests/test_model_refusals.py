"""A model endpoint that refuses the key or does not know the model stops the run at its first
call (one line naming the role, model and endpoint; exit 2; nothing else attempted), and a key a
server echoes in an error body never reaches the store or a report (issue 36)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from intellagent.cli import cli
from intellagent.redaction import MASK, Redactor
from intellagent.testing.openai_server import OpenAIServer
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

KEY = "sk-test-4f9c2a7e1b0d8e6f"


def pipeline(tmp_path, server: OpenAIServer, structured: str = "json_schema", roles: str = "") -> str:
    """The IntellAgent pipeline with every role on the test server, its key from MY_KEY."""
    text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
        "default: {model: mock/schema}",
        f"default: {{model: small-model, base_url: '{server.base_url}', api_key_env: MY_KEY, "
        f"structured: {structured}}}{roles}\n  max_retries: 1\n  backoff_base: 0.01\n"
        "  prices: {small-model: {input: 0.1, output: 0.2}}")
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("status,structured,what", [
    ("401", "auto", "refused the key"), ("403", "json_schema", "refused the key"),
    ("404", "json_schema", "does not know the model")])
def test_a_refused_key_or_unknown_model_stops_the_run_at_its_first_call(status, structured, what, tmp_path,
                                                                         runner, monkeypatch):
    monkeypatch.setenv("MY_KEY", KEY)
    with OpenAIServer(faults=[status] * 50, echo_key=True) as server:
        result = runner.invoke(cli, ["run", "education", "--pipeline", pipeline(tmp_path, server, structured),
                                     "--events", "3", "--workspace", str(tmp_path / "ws")])
        sent = len(server.requests)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert f"role 'extractor' (model 'small-model' at {server.base_url})" in lines[0]
    assert what in lines[0] and f"{status}:" in lines[0]
    assert sent == 1  # nothing else was attempted: no retry, no other mode, no other item
    assert KEY not in result.output + result.stderr and MASK in lines[0]  # the echoed key is masked
    assert KEY.encode() not in b"".join(p.read_bytes() for p in (tmp_path / "ws").glob("intellagent.db*"))


def test_the_agent_under_tests_endpoint_refusing_the_key_stops_the_run_not_the_agent(tmp_path, runner, monkeypatch):
    """Not an agent failure (agent-error), not an infra error per dialog: the run stops."""
    monkeypatch.setenv("MY_KEY", KEY)
    with OpenAIServer(faults=["401"] * 50) as server:
        text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
            "default: {model: mock/schema}",
            f"default: {{model: mock/schema}}\n  roles: {{agent: {{model: agent-model, base_url: '{server.base_url}', "
            "api_key_env: MY_KEY}}")
        (tmp_path / "p.yaml").write_text(text)
        result = runner.invoke(cli, ["run", "airline", "--pipeline", str(tmp_path / "p.yaml"), "--events", "4",
                                     "--workspace", str(tmp_path / "ws")])
        sent = len(server.requests)
    assert result.exit_code == 2, (result.output, result.exception)
    assert f"role 'agent' (model 'agent-model' at {server.base_url})" in result.stderr
    assert "refused the key (401:" in result.stderr and sent == 1


def test_a_key_echoed_in_error_bodies_is_in_no_stored_or_reported_text(tmp_path, runner, monkeypatch):
    """Every call fails with a 500 whose body quotes the key (and the Authorization header): the
    run finishes with infra errors, and neither the store nor any report holds the key."""
    monkeypatch.setenv("MY_KEY", KEY)
    with OpenAIServer(faults=["500"] * 200, echo_key=True) as server:
        result = runner.invoke(cli, ["run", "education", "--pipeline", pipeline(tmp_path, server),
                                     "--events", "2", "--workspace", str(tmp_path / "ws")])
        echoed = server.faults_sent["500"]
    assert result.exit_code == 3, (result.output, result.exception)  # the run could not finish
    assert echoed >= 2 and KEY not in result.output + result.stderr
    files = list((tmp_path / "ws").glob("intellagent.db*")) + list((tmp_path / "ws").glob("runs/*/*"))
    assert {p.suffix for p in files} >= {".db", ".html", ".json", ".csv"}
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    notes = [i["note"] for i in report["items"] if i["status"] == "infra-error"]
    assert notes and all(MASK in n for n in notes)  # the error is kept, without the key


def test_the_redactor_masks_named_keys_and_any_authorization_value(monkeypatch):
    monkeypatch.setenv("A_KEY", "abcdef-123456")
    monkeypatch.setenv("SHORT", "ab")
    redact = Redactor.from_env(["A_KEY", "SHORT", "UNSET"])
    text = ('key abcdef-123456 or "abcdef-123456"; Authorization: Bearer tok.en-xyz123; '
            "authorization=Basic dXNlcjpwYXNz, bearer zzzzzzzzzzzz, ab stays")
    masked = redact(text)
    for secret in ("abcdef-123456", "tok.en-xyz123", "dXNlcjpwYXNz", "zzzzzzzzzzzz"):
        assert secret not in masked, masked
    assert masked.endswith("ab stays") and redact(None) is None


class EchoingAgent(BaseHTTPRequestHandler):
    """An http agent that quotes the token it was sent (without its scheme) in every error body:
    a 401 to everything, or (``after_preflight``) a 400 to every turn but the pre-flight's."""

    after_preflight = False

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        ok = self.after_preflight and body["conversation_id"] == "intellagent-preflight"
        status, data = (200, {"content": "hello"}) if ok else (401 if not self.after_preflight else 400,
                                                                 {"error": f"token {token!r} rejected"})
        out = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("after_preflight", [False, True], ids=["preflight", "dialogs"])
def test_an_http_agents_token_echoed_without_its_scheme_is_in_no_output_or_stored_text(after_preflight, tmp_path,
                                                                                      runner, monkeypatch):
    monkeypatch.setenv("AGENT_TOKEN", f"Bearer {KEY}")
    handler = type("Handler", (EchoingAgent,), {"after_preflight": after_preflight})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/chat"
        result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path / "ws"),
                                     "--agent", "http", "--set", f"agent.with.url={url}", "--set",
                                     "agent.with.headers={Authorization: {env: AGENT_TOKEN}}"])
    finally:
        server.shutdown()
        server.server_close()
    assert KEY not in result.output + result.stderr
    if not after_preflight:  # refused before the run: one line, the cause named, the token masked
        assert result.exit_code == 2, (result.output, result.exception)
        line, = result.stderr.strip().splitlines()
        assert f"{url}: the agent answered HTTP 401: " in line and MASK in line
    else:
        assert result.exit_code == 0, (result.output, result.exception)
        files = [p for p in (tmp_path / "ws").rglob("*") if p.is_file()]
        assert any(MASK.encode() in p.read_bytes() for p in files)  # the error was kept, masked
    for path in (p for p in (tmp_path / "ws").rglob("*") if p.is_file()):
        assert KEY.encode() not in path.read_bytes(), path


def test_the_redactor_masks_a_headers_value_without_its_scheme_and_keys_in_a_urls_query():
    redact = Redactor(["Bearer tok-123456789"])
    masked = redact("sent tok-123456789 to https://host/v1/models?key=AIza123&alt=json and "
                    "https://host/x?a=1&api_key=k-999&access_token=t-1 then ?page=2")
    for secret in ("tok-123456789", "AIza123", "k-999", "t-1"):
        assert secret not in masked, masked
    assert "alt=json" in masked and "?a=1" in masked and "?page=2" in masked
