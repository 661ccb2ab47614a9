"""Testing a team's own agent: a changed agent is re-tested, an unreachable one is caught before
any cost, a slow one never stalls the run, a crash inside an agent plugin costs its dialog only,
and the report says exactly what was tested."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.agent import Agent
from intellagent.cli import cli
from tests.conftest import REPO, TAU_BENCH
from intellagent_plugins.reporters.writers import read_report

# -- agents of the tests' own ------------------------------------------------------------------
# (the CLI imports them as ``tests.test_own_agent``, which pytest may have imported under another
# name: their state is read through ``agents()``)


def agents():
    import importlib

    return importlib.import_module("tests.test_own_agent")


CALLS: list[str] = []
REPLY = {"text": "first reply"}


def changing_agent(messages, tools):
    """A Python agent whose answer depends on a value outside what it is sent."""
    CALLS.append(messages[-1]["content"])
    return REPLY["text"]


def reads_a_file(messages, tools):
    """A Python agent whose answer depends on a file it reads."""
    CALLS.append(messages[-1]["content"])
    return Path(os.environ["AGENT_ANSWER_FILE"]).read_text()


ACTIVE = {"now": 0, "most": 0}
LOCK = threading.Lock()


def slow_sync_agent(messages, tools):
    """A sync agent that takes a while: several must run at once."""
    with LOCK:
        ACTIVE["now"] += 1
        ACTIVE["most"] = max(ACTIVE["most"], ACTIVE["now"])
    time.sleep(0.3)
    with LOCK:
        ACTIVE["now"] -= 1
    return "done"


def report(workspace: Path, newest: bool = True) -> dict:
    paths = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)
    return read_report(paths[-1 if newest else 0])


def replies(rep: dict) -> list[str]:
    return [t["content"] for i in rep["items"] if i["step"] == "dialogs"
            for t in i["value"]["turns"] if t["role"] == "assistant"]


def run(runner, workspace, *extra, env="education", events="3", plugins=()):
    args = ["run", env, *(["--events", events] if events else []), "--workspace", str(workspace), *extra]
    return runner.invoke(cli, args, obj={"plugins": plugins} if plugins else None)


def python_agent(callable_: str, **options) -> list[str]:
    out = ["--agent", "python", "--set", f"agent.with.callable={callable_}"]
    for key, value in options.items():
        out += ["--set", f"agent.with.{key}={value}"]
    return out


def calls_of(workspace: Path) -> int:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]


# -- 1. a changed agent is re-tested -----------------------------------------------------------

def test_a_black_box_python_agent_is_asked_again_and_its_new_answers_reported(runner, tmp_path):
    state = agents()
    state.CALLS.clear()
    state.REPLY["text"] = "first reply"
    first = run(runner, tmp_path, *python_agent("tests.test_own_agent:changing_agent"))
    assert first.exit_code == 0, first.output
    asked = len(state.CALLS)
    assert asked > 0 and set(replies(report(tmp_path))) == {"first reply"}
    assert "black box" in first.stdout
    state.REPLY["text"] = "second reply"  # the agent changed; the command is the same
    second = run(runner, tmp_path, *python_agent("tests.test_own_agent:changing_agent"))
    assert second.exit_code == 0, second.output
    assert len(state.CALLS) > asked, "the changed agent was never asked"
    assert set(replies(report(tmp_path))) == {"second reply"}


def test_a_python_agent_reading_a_file_is_re_tested_when_the_file_changes(runner, tmp_path, monkeypatch):
    answer = tmp_path / "answer.txt"
    answer.write_text("old answer")
    monkeypatch.setenv("AGENT_ANSWER_FILE", str(answer))
    ws = tmp_path / "ws"
    assert run(runner, ws, *python_agent("tests.test_own_agent:reads_a_file")).exit_code == 0
    answer.write_text("new answer")
    assert run(runner, ws, *python_agent("tests.test_own_agent:reads_a_file")).exit_code == 0
    assert set(replies(report(ws))) == {"new answer"}


AGENT_PACKAGE = '''
def agent(messages, tools):
    with open(__import__("os").environ["AGENT_LOG"], "a") as fh:
        fh.write("call\\n")
    return ANSWER

ANSWER = "{answer}"
'''


@pytest.fixture
def agent_package(tmp_path, monkeypatch):
    root = tmp_path / "src"
    (root / "myagent").mkdir(parents=True)
    (root / "myagent" / "__init__.py").write_text("")
    (root / "myagent" / "core.py").write_text(AGENT_PACKAGE.format(answer="v1 answer"))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("AGENT_LOG", str(tmp_path / "agent.log"))
    yield root
    for name in [m for m in sys.modules if m == "myagent" or m.startswith("myagent.")]:
        del sys.modules[name]


def test_version_code_reuses_dialogs_of_an_unchanged_package_and_not_of_an_edited_one(runner, tmp_path, agent_package):
    log = tmp_path / "agent.log"
    ws = tmp_path / "ws"
    agent = python_agent("myagent.core:agent", version="code")
    assert run(runner, ws, *agent).exit_code == 0
    made = log.read_text().count("call")
    assert made > 0
    again = run(runner, ws, *agent)
    assert again.exit_code == 0 and log.read_text().count("call") == made, "an unchanged agent was asked again"
    assert "dialogs: 3 reused from run" in again.stdout
    (agent_package / "myagent" / "core.py").write_text(AGENT_PACKAGE.format(answer="v2 answer"))
    del sys.modules["myagent.core"]
    edited = run(runner, ws, *agent)
    assert edited.exit_code == 0 and log.read_text().count("call") > made
    assert set(replies(report(ws))) == {"v2 answer"}


PROMPTED_AGENT = '''
from pathlib import Path


def agent(messages, tools):
    with open(__import__("os").environ["AGENT_LOG"], "a") as fh:
        fh.write("call\\n")
    return (Path(__file__).parent / "prompt.md").read_text()
'''


def test_version_code_re_tests_an_agent_whose_prompt_file_in_its_package_changed(runner, tmp_path, agent_package):
    package = agent_package / "myagent"
    (package / "core.py").write_text(PROMPTED_AGENT)
    (package / "prompt.md").write_text("Answer politely.")
    log, ws = tmp_path / "agent.log", tmp_path / "ws"
    agent = python_agent("myagent.core:agent", version="code")
    assert run(runner, ws, *agent).exit_code == 0
    made = log.read_text().count("call")
    assert run(runner, ws, *agent).exit_code == 0 and log.read_text().count("call") == made
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"recompiled")  # not the agent
    assert run(runner, ws, *agent).exit_code == 0 and log.read_text().count("call") == made
    (package / "prompt.md").write_text("Answer rudely.")  # the agent's prompt, not its code, changed
    edited = run(runner, ws, *agent)
    assert edited.exit_code == 0 and log.read_text().count("call") > made, "the changed agent was not asked"
    assert set(replies(report(ws))) == {"Answer rudely."}


def test_no_cache_asks_a_versioned_agent_again(runner, tmp_path, agent_package):
    log = tmp_path / "agent.log"
    ws = tmp_path / "ws"
    agent = python_agent("myagent.core:agent", version="v1")
    assert run(runner, ws, *agent).exit_code == 0
    made = log.read_text().count("call")
    assert run(runner, ws, *agent, "--no-cache").exit_code == 0
    assert log.read_text().count("call") == 2 * made


class Endpoint:
    """A local HTTP agent: answers ``reply``, counts requests, remembers what it was sent."""

    def __init__(self, reply: str = "hello from http", status: int = 200, version: str | None = None):
        self.reply, self.status, self.version = reply, status, version
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.peers: set[tuple] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a pooled client reuses its connections

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append(dict(self.headers))
                outer.peers.add(self.client_address)
                data = json.dumps({"content": outer.reply}).encode()
                self.send_response(outer.status)
                if outer.version:
                    self.send_header("X-Agent-Version", outer.version)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/chat"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def dialog_requests(self):
        return [r for r in self.requests if r["conversation_id"] != "intellagent-preflight"]


def http_agent(url: str, **options) -> list[str]:
    out = ["--agent", "http", "--set", f"agent.with.url={url}"]
    for key, value in options.items():
        out += ["--set", f"agent.with.{key}={value}"]
    return out


def test_an_http_agent_restarted_with_another_reply_is_asked_again(runner, tmp_path):
    first = Endpoint("the old reply")
    try:
        assert run(runner, tmp_path, *http_agent(first.url)).exit_code == 0
    finally:
        first.close()
    second = Endpoint("the new reply")
    try:
        result = run(runner, tmp_path, *http_agent(second.url))
    finally:
        second.close()
    assert result.exit_code == 0, result.output
    assert second.dialog_requests(), "the restarted agent received no request"
    assert set(replies(report(tmp_path))) == {"the new reply"}


def test_an_http_agent_gets_its_headers_one_conversation_id_per_dialog_and_one_pool(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_AGENT_TOKEN", "s3cret-token-value")
    endpoint = Endpoint("fine")
    try:
        result = run(runner, tmp_path, *http_agent(endpoint.url), "--set",
                     "agent.with.headers={Authorization: {env: MY_AGENT_TOKEN}, X-Team: qa}", events="4")
    finally:
        endpoint.close()
    assert result.exit_code == 0, result.output
    assert all(h.get("Authorization") == "s3cret-token-value" and h.get("X-Team") == "qa" for h in endpoint.headers)
    by_dialog: dict[str, int] = {}
    for r in endpoint.dialog_requests():
        by_dialog[r["conversation_id"]] = by_dialog.get(r["conversation_id"], 0) + 1
    assert len(by_dialog) == 4  # one id per dialog, the same for each of its turns
    assert len(endpoint.peers) < len(endpoint.requests)  # connections were kept and reused
    stored = (tmp_path / "intellagent.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("runs/*/*") if p.is_file())
    assert b"s3cret-token-value" not in stored and b"MY_AGENT_TOKEN" in stored


def test_an_http_agent_echoing_its_token_in_its_answer_leaves_it_nowhere(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_AGENT_TOKEN", "Bearer s3cret-token-value")
    endpoint = Endpoint("debug: I was called with Bearer s3cret-token-value; the token expiration is near")
    try:
        result = run(runner, tmp_path, *http_agent(endpoint.url), "--set",
                     "agent.with.headers={Authorization: {env: MY_AGENT_TOKEN}}")
    finally:
        endpoint.close()
    assert result.exit_code == 0, result.output
    assert set(replies(report(tmp_path))) == {"debug: I was called with [redacted]; the token "
                                              "expiration is near"}  # prose is left as it was
    stored = (tmp_path / "intellagent.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("**/*") if p.is_file())
    assert b"s3cret-token-value" not in stored


@pytest.mark.parametrize("headers,message", [
    ("{Authorization: literal-token}", "secrets are not accepted in YAML"),
    ("{Authorization: {env: NOT_SET_ANYWHERE}}", "the environment variable NOT_SET_ANYWHERE is not set"),
])
def test_http_agent_secrets_come_from_the_environment(runner, tmp_path, headers, message):
    endpoint = Endpoint()
    try:
        result = run(runner, tmp_path, *http_agent(endpoint.url), "--set", f"agent.with.headers={headers}")
    finally:
        endpoint.close()
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_http_agent_that_reports_a_version_has_its_dialogs_reused_for_that_version(runner, tmp_path):
    endpoint = Endpoint("versioned", version="2.1.0")
    try:
        assert run(runner, tmp_path, *http_agent(endpoint.url)).exit_code == 0
        asked = len(endpoint.dialog_requests())
        again = run(runner, tmp_path, *http_agent(endpoint.url))
        assert again.exit_code == 0 and len(endpoint.dialog_requests()) == asked
        assert "(version 2.1.0)" in again.stdout
        endpoint.version = "2.2.0"
        assert run(runner, tmp_path, *http_agent(endpoint.url)).exit_code == 0
        assert len(endpoint.dialog_requests()) > asked
    finally:
        endpoint.close()


# -- 2. precedence ---------------------------------------------------------------------------------

def test_set_agent_model_beats_model_whatever_the_order(runner, tmp_path):
    result = run(runner, tmp_path, "--set", "llm.roles.agent.model=mock/schema",
                 "--model", "mock/scripted", "--set", "llm.roles.user.model=mock/schema",
                 "--set", "llm.roles.critic.model=mock/schema", "--set", "llm.roles.generator.model=mock/schema",
                 "--set", "llm.roles.extractor.model=mock/schema", "--set", "llm.roles.edges.model=mock/schema",
                 events="2")
    assert result.exit_code == 0, result.output
    info = report(tmp_path)["info"]
    assert info["models"]["agent"] == "mock/schema"
    with sqlite3.connect(tmp_path / "intellagent.db") as conn:
        models = {m for m, in conn.execute("SELECT DISTINCT model FROM llm_calls WHERE role = 'agent'")}
    assert models == {"mock/schema"}


def test_model_sets_every_role_the_set_flag_does_not(runner, tmp_path):
    valid = runner.invoke(cli, ["validate", "intellagent", "--model", "gpt-4o",
                                "--set", "llm.roles.agent.model=gpt-4o-mini"])
    assert valid.exit_code == 0, valid.output
    assert "model role agent: gpt-4o-mini" in valid.stdout and "model role user: gpt-4o" in valid.stdout


# -- 3. pre-flight and error classes -------------------------------------------------------------

def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("agent,cause", [
    (lambda: http_agent(f"http://127.0.0.1:{free_port()}/chat"), "connection refused"),
    (lambda: python_agent("tests.test_own_agent:no_such_function"), "has no 'no_such_function'"),
    (lambda: python_agent("tests.test_own_agent:takes_nothing"), "does not take (messages, tools)"),
])
def test_an_agent_that_cannot_be_used_stops_the_run_before_any_model_call(runner, tmp_path, agent, cause):
    result = run(runner, tmp_path, *agent())
    assert result.exit_code == 2, result.output
    assert cause in result.stderr and "agent" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "intellagent.db").exists() or calls_of(tmp_path) == 0


def takes_nothing():
    return "hi"


def test_an_agent_that_goes_away_mid_run_leaves_infra_errors_counted_by_cause(runner, tmp_path):
    endpoint = Endpoint("hi")
    seen = {"n": 0}
    original = endpoint.server.RequestHandlerClass.do_POST

    def flaky(handler):  # answers the pre-flight, then refuses connections for good
        seen["n"] += 1
        if seen["n"] > 1:
            endpoint.server.socket.close()
            handler.close_connection = True
            return
        original(handler)

    endpoint.server.RequestHandlerClass.do_POST = flaky
    try:
        result = run(runner, tmp_path, *http_agent(endpoint.url, retries=0), "--fail-under", "success=0.5",
                     "--set", "report=[html, json, junit]")
    finally:
        endpoint.server.shutdown()
    assert result.exit_code == 3, result.output  # the run could not finish: not a failing agent
    assert "could not reach the agent" in result.stdout
    # its gate is not decided (exit 3 says so), in the summary and the reports alike
    assert "gate success >= 0.5: – undecided (the run did not finish)" in result.stdout, result.stdout
    assert "FAILED" not in result.stdout
    folder = next(tmp_path.glob("runs/*/"))
    assert "undecided" in (folder / "report.html").read_text()
    assert "FAILED" not in (folder / "report.html").read_text()
    assert 'value="– undecided (the run did not finish)' in (folder / "report.junit.xml").read_text()
    statuses = {i["status"] for i in report(tmp_path)["items"] if i["step"] == "dialogs"}
    assert statuses == {"infra-error"}  # retried by the next run, never counted against the agent


@pytest.mark.parametrize("status,outcome,exit_code", [
    (500, "agent-error", 0),  # the agent's code crashed: its failure, not the network's
    (502, "infra-error", 3), (503, "infra-error", 3), (504, "infra-error", 3),  # a gateway, an overload
    (429, "infra-error", 3),  # the endpoint's rate limit: asked again by the next run
])
def test_an_http_agent_crash_is_its_failure_and_a_gateway_fault_is_infra(runner, tmp_path, status, outcome, exit_code):
    endpoint = Endpoint("hi")
    original = endpoint.server.RequestHandlerClass.do_POST

    def answers_then_fails(handler):  # answers the pre-flight, then every dialog turn fails
        if endpoint.requests:
            handler.rfile.read(int(handler.headers["Content-Length"]))
            body = b"Traceback (most recent call last):\nZeroDivisionError: division by zero"
            handler.send_response(status)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        original(handler)

    endpoint.server.RequestHandlerClass.do_POST = answers_then_fails
    try:
        result = run(runner, tmp_path, *http_agent(endpoint.url, retries=0))
    finally:
        endpoint.close()
    assert result.exit_code == exit_code, result.output
    dialogs = [i for i in report(tmp_path)["items"] if i["step"] == "dialogs"]
    assert {i["status"] for i in dialogs} == {"infra-error" if outcome == "infra-error" else "ok"}
    assert all(f"HTTP {status}" in i["value"]["error"] for i in dialogs)
    verdicts = {i["status"] for i in report(tmp_path)["items"] if i["step"] == "verdicts"}
    assert verdicts == ({"agent-error"} if outcome == "agent-error" else set())
    assert ("could not reach the agent" in result.stdout) == (outcome == "infra-error")


class ExplodingAgent(Agent):
    """A third party's agent plugin with a bug."""

    async def step(self, messages, tools):
        raise ZeroDivisionError("a bug in the plugin")


class UnbuildableAgent(Agent):
    def __init__(self, config, ctx, ground_truth=None):
        raise RuntimeError("cannot be built")


def agent_plugin():
    module = types.ModuleType("agentbugs")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_agents = hookimpl(lambda register: [register("exploding", ExplodingAgent),
                                                        register("unbuildable", UnbuildableAgent)])
    return module


@pytest.mark.parametrize("name,cause", [("acme/exploding", "ZeroDivisionError: a bug in the plugin"),
                                        ("acme/unbuildable", "could not be made: RuntimeError")])
def test_an_agent_plugin_that_raises_gives_agent_errors_and_the_run_finishes(runner, tmp_path, name, cause):
    result = run(runner, tmp_path, "--agent", name, plugins=(agent_plugin(),))
    assert result.exit_code == 0, result.output
    items = [i for i in report(tmp_path)["items"] if i["step"] == "verdicts"]
    assert items and {i["status"] for i in items} == {"agent-error"}
    dialogs = [i for i in report(tmp_path)["items"] if i["step"] == "dialogs"]
    assert all(cause in i["value"]["error"] for i in dialogs)


async def exiting_async_agent(messages, tools):
    """A Python agent of a team's that gives up by calling sys.exit."""
    sys.exit("the agent gave up")


def exiting_sync_agent(messages, tools):
    sys.exit("the agent gave up")


@pytest.mark.parametrize("callable_", ["tests.test_own_agent:exiting_async_agent",
                                       "tests.test_own_agent:exiting_sync_agent"])
def test_a_python_agent_calling_sys_exit_fails_its_dialogs_and_the_run_finishes(runner, tmp_path, callable_):
    result = run(runner, tmp_path, *python_agent(callable_))
    assert result.exit_code == 0, result.output  # not 1, which says a gate failed; with a report
    verdicts = [i for i in report(tmp_path)["items"] if i["step"] == "verdicts"]
    assert verdicts and {i["status"] for i in verdicts} == {"agent-error"}
    assert all("the agent gave up" in i["note"] for i in verdicts)


# -- 4. isolation ----------------------------------------------------------------------------------

def test_a_sync_agent_runs_off_the_event_loop(runner, tmp_path):
    state = agents()
    state.ACTIVE.update(now=0, most=0)
    result = run(runner, tmp_path, *python_agent("tests.test_own_agent:slow_sync_agent"), events="6")
    assert result.exit_code == 0, result.output
    assert state.ACTIVE["most"] > 1, "sync agent turns ran one at a time"


SLEEPY_TOOL = '''
import time


def slow_lookup(db, customer_id):
    time.sleep(60)
    return "never"


def raises_interrupt(db, customer_id):
    raise KeyboardInterrupt("a tool that thinks it was interrupted")
'''


def sleepy_env(shop: Path) -> Path:
    (shop / "slow.py").write_text(SLEEPY_TOOL)
    tools = (shop / "tools.yaml").read_text() + """\
  - name: slow_lookup
    description: Look up slowly.
    implementation: slow.py:slow_lookup
    timeout: 1
    parameters:
      type: object
      properties:
        customer_id: {type: string}
      required: [customer_id]
  - name: interrupted
    description: A tool that raises KeyboardInterrupt.
    implementation: slow.py:raises_interrupt
    parameters:
      type: object
      properties:
        customer_id: {type: string}
      required: [customer_id]
"""
    (shop / "tools.yaml").write_text(tools)
    return shop


def calls_tool(name: str):
    def agent(messages, tools):
        if messages[-1]["role"] == "tool":
            return "done: " + messages[-1]["content"][:60]
        return {"tool_calls": [{"name": name, "arguments": {"customer_id": "c1"}}]}
    return agent


slow_agent = calls_tool("slow_lookup")
interrupt_agent = calls_tool("interrupted")


def test_a_tool_that_sleeps_60_s_times_out_and_the_run_finishes(shop, tmp_path):
    env = sleepy_env(shop)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "intellagent", "run", str(env), "--events", "2",
                           "--workspace", str(tmp_path / "ws"),
                           *python_agent("tests.test_own_agent:slow_agent")],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 3, done.stderr  # its dialogs could not finish: not the agent's fault
    assert time.monotonic() - started < 50, "the run waited for the tool"
    rep = report(tmp_path / "ws")
    dialogs = [i for i in rep["items"] if i["step"] == "dialogs"]
    assert dialogs and all(i["status"] == "infra-error" for i in dialogs)
    assert all("'slow_lookup' did not return within 1 s" in i["note"] for i in dialogs)


def test_a_tool_raising_keyboard_interrupt_is_an_error_the_agent_sees(runner, shop, tmp_path):
    env = sleepy_env(shop)
    result = runner.invoke(cli, ["run", str(env), "--events", "2", "--workspace", str(tmp_path),
                                 *python_agent("tests.test_own_agent:interrupt_agent")])
    assert result.exit_code == 0, result.output
    outputs = [c["output"] for i in report(tmp_path)["items"] if i["step"] == "dialogs"
               for t in i["value"]["turns"] for c in t["tool_calls"]]
    assert outputs and all("crashed: KeyboardInterrupt" in o for o in outputs)


# -- 5. provenance ---------------------------------------------------------------------------------

def test_report_records_the_prompt_override_and_the_agent_url(runner, tmp_path):
    prompt = tmp_path / "prompt-v2.md"
    prompt.write_text("You are a tutor. Be brief.\n")
    endpoint = Endpoint("ok")
    try:
        result = run(runner, tmp_path / "ws", *http_agent(endpoint.url), "--prompt", str(prompt))
    finally:
        endpoint.close()
    assert result.exit_code == 0, result.output
    p = report(tmp_path / "ws")["info"]["provenance"]
    import hashlib

    assert p["prompt"] == {"path": str(prompt.resolve()), "sha256": hashlib.sha256(prompt.read_bytes()).hexdigest()}
    assert p["agent"]["use"] == "intellagent/http" and p["agent"]["endpoint"] == endpoint.url
    assert p["agent"]["identity"] is None and p["environment"] == "education" and p["seed"] == 0
    assert p["environment_hash"] and p["pipeline_hash"] and p["intellagent"]
    html = next((tmp_path / "ws").glob("runs/*/report.html")).read_text()
    assert endpoint.url in html and p["prompt"]["sha256"][:16] in html


def test_compare_lists_what_differs_and_refuses_two_pipelines(runner, tmp_path):
    ws = tmp_path / "ws"
    prompt = tmp_path / "p.md"
    prompt.write_text("Another prompt.\n")
    assert run(runner, ws).exit_code == 0
    first = report(ws)["info"]["run_id"]
    assert run(runner, ws, "--prompt", str(prompt)).exit_code == 0
    compared = runner.invoke(cli, ["compare", first, "latest", "--workspace", str(ws)])
    assert compared.exit_code == 0, compared.output
    lines = compared.stdout.splitlines()
    start = lines.index("what differs in what was tested (A → B):")
    differences = [line.strip() for line in lines[start + 1:] if line.startswith("  ")]
    assert any(d.startswith("prompt: – → path=" + str(prompt.resolve())) for d in differences)
    assert not any(d.startswith(("agent", "seed", "pipeline:")) for d in differences)
    tau = run(runner, ws, "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "airline"),
              "--set", "steps.tasks.with.indices=[0]", env="airline", events=None)
    assert tau.exit_code == 0, tau.output
    refused = runner.invoke(cli, ["compare", first, "latest", "--workspace", str(ws)])
    assert refused.exit_code == 2 and "tested different pipelines" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_compare_of_two_black_box_runs_never_says_the_agent_was_the_same(runner, tmp_path):
    endpoint = Endpoint("the old reply")
    try:
        assert run(runner, tmp_path, *http_agent(endpoint.url)).exit_code == 0
        first = report(tmp_path)["info"]["run_id"]
        endpoint.reply = "the new reply"  # the agent changed behind the same URL, no version given
        assert run(runner, tmp_path, *http_agent(endpoint.url)).exit_code == 0
        versioned = run(runner, tmp_path, *http_agent(endpoint.url, version="v2"))
        assert versioned.exit_code == 0, versioned.output
    finally:
        endpoint.close()
    runs = [json.loads(p.read_text())["info"]["run_id"] for p in
            sorted(tmp_path.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)]
    compared = runner.invoke(cli, ["compare", first, runs[1], "--workspace", str(tmp_path)])
    assert compared.exit_code == 0, compared.output
    assert "what was tested is the same in both runs" not in compared.stdout
    assert "a black box (no version) in both runs: whether it changed between them is not known" \
        in compared.stdout
    page = next(tmp_path.glob(f"runs/compare-{first}-{runs[1]}.html")).read_text()
    assert "whether it changed between them is not known" in page and "Nothing: the same" not in page
    # a version on one side is a difference, said as one
    against = runner.invoke(cli, ["compare", runs[1], runs[2], "--workspace", str(tmp_path)])
    assert against.exit_code == 0, against.output
    assert "whether it changed" not in against.stdout and "version=v2" in against.stdout


# -- a killed run of a black box resumes without replaying its finished dialogs ------------------

def test_a_killed_black_box_run_resumes_without_replaying_finished_dialogs(tmp_path):
    ws = tmp_path / "ws"
    log = tmp_path / "turns.log"
    env = dict(os.environ, PYTHONPATH=str(REPO), SLOW_AGENT_LOG=str(log))
    args = [sys.executable, "-m", "intellagent", "run", "education", "--events", "8", "--workspace", str(ws),
            *python_agent("tests.test_own_agent:logging_slow_agent"), "--executor", "local",
            "--set", "executor.with.items_in_flight=1"]
    proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    finished = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(ws / "intellagent.db") as conn:
                finished = conn.execute("SELECT COUNT(*) FROM items WHERE step = 'intellagent/policy-user'").fetchone()[0]
        except sqlite3.Error:
            pass
        if finished >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(ws / "intellagent.db") as conn:
        done = {k for k, in conn.execute("SELECT key FROM items WHERE step = 'intellagent/policy-user'")}
        first_run = conn.execute("SELECT id FROM runs").fetchone()[0]
    assert 2 <= len(done) < 8, "kill the run half-way"
    resumed = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    info = report(ws)["info"]
    assert info["reused"]["dialogs"] == {first_run: len(done)}
    with sqlite3.connect(ws / "intellagent.db") as conn:
        made_by = dict(conn.execute("SELECT key, run_id FROM items WHERE step = 'intellagent/policy-user'"))
    assert all(made_by[k] == first_run for k in done), "a finished dialog was made again"


def logging_slow_agent(messages, tools):
    with open(os.environ["SLOW_AGENT_LOG"], "a") as fh:
        fh.write(messages[-1]["content"][:40].replace("\n", " ") + "\n")
    time.sleep(0.2)
    return "noted"
