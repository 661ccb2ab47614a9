"""Agents that run their own tool loop: an HTTP agent calling the conversation's tools over MCP
(``tools: mcp``) and an A2A agent (``a2a``), each a real server on 127.0.0.1 that connects to the
MCP URL it is given with the mcp client, reads and writes, then answers. Their calls are in the
transcript and their writes in the database diff; a conversation's URL is refused once it ends."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role
from google.protobuf.json_format import MessageToDict
from mcp import Client
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.offload import Offload
from intellagent.session import ToolBox
from intellagent_plugins.agents.tool_endpoint import ToolServer
from intellagent_plugins.reporters.writers import read_report


class Served:
    """An ASGI app on a free port of 127.0.0.1, in a thread of its own."""

    def __init__(self, make_app) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(make_app(self.base), log_level="error",
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def status_of(url: str) -> int:
    """The HTTP status a tools URL answers an MCP request with."""
    request = urllib.request.Request(url, method="POST", data=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


class ToolUser:
    """What both test agents do with the tools URL they are given: list the tools, read a
    customer, add credit, answer with the new credit. Remembers the URLs it saw."""

    def __init__(self, amount: int) -> None:
        self.amount = amount
        self.urls: list[str] = []
        self.listed: list[list[str]] = []
        self.ended_status: list[int] = []

    async def turn(self, url: str) -> str:
        self.urls.append(url)
        async with Client(url) as tools:
            self.listed.append([t.name for t in (await tools.list_tools()).tools])
            read = await tools.call_tool("get_customer", {"customer_id": "c1"})
            write = await tools.call_tool("add_credit", {"customer_id": "c1", "amount": self.amount})
        assert not read.is_error, read.content[0].text
        return f"credit is now {json.loads(write.content[0].text)['credit']}"


def mcp_loop_agent(user: ToolUser):
    """An HTTP agent that runs its own tool loop on the tools_url of each request."""

    def make(base: str) -> Starlette:
        async def chat(request):
            body = await request.json()
            if body["conversation_id"] != "intellagent-preflight":  # the pre-flight's is over by now
                user.ended_status.append(await asyncio.to_thread(status_of, user.urls[0]))
            return JSONResponse({"content": await user.turn(body["tools_url"])})

        return Starlette(routes=[Route("/chat", chat, methods=["POST"])])

    return make


def a2a_agent(user: ToolUser, metadata: list[dict]):
    """An A2A agent (a2a-sdk server) running its tools through the MCP URL in its metadata."""

    class Executor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            on_message = MessageToDict(context.message.metadata)
            metadata.append({"request": dict(context.metadata), "message": on_message,
                             "context": context.context_id, "text": context.get_user_input()})
            reply = await user.turn(context.metadata["intellagent/mcp"]["url"])
            await event_queue.enqueue_event(Message(role=Role.ROLE_AGENT, message_id=f"r{len(metadata)}",
                                                    context_id=context.context_id, parts=[Part(text=reply)]))

        async def cancel(self, context, event_queue):
            raise NotImplementedError

    def make(base: str) -> Starlette:
        card = AgentCard(name="tool-user", description="reads and writes through MCP", version="3.1",
                         supported_interfaces=[AgentInterface(url=f"{base}/", protocol_binding="JSONRPC",
                                                              protocol_version="1.0")],
                         capabilities=AgentCapabilities(streaming=False),
                         default_input_modes=["text/plain"], default_output_modes=["text/plain"],
                         skills=[AgentSkill(id="credit", name="credit", description="adds credit", tags=["t"])])
        handler = DefaultRequestHandlerV2(agent_executor=Executor(), task_store=InMemoryTaskStore(),
                                          agent_card=card)
        return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))

    return make


def run(runner, env: Path, workspace: Path, *agent: str):
    return runner.invoke(cli, ["run", str(env), "--events", "2", "--workspace", str(workspace), *agent])


def dialogs(workspace: Path) -> list[dict]:
    [path] = workspace.glob("runs/*/report.json")
    return [i for i in read_report(path)["items"] if i["step"] == "dialogs"]


def assert_calls_in_transcript_and_diff(items: list[dict], amount: int) -> None:
    assert items and all(i["status"] == "ok" for i in items), [i["note"] for i in items]
    for item in items:
        dialog = item["value"]
        answered = [t for t in dialog["turns"] if t["role"] == "assistant"]
        assert answered
        for turn in answered:  # each turn's calls, as made, with what the tools answered
            calls = [(c["name"], json.loads(c["arguments"]), c["error"]) for c in turn["tool_calls"]]
            assert calls == [("get_customer", {"customer_id": "c1"}, False),
                             ("add_credit", {"customer_id": "c1", "amount": amount}, False)]
            assert json.loads(turn["tool_calls"][1]["output"])["credit"] == int(turn["content"].split()[-1])
        changed = dialog["db_diff"]["tables"]["customers"]["changed"]["c1"]
        assert changed == [{"path": "credit", "before": 10, "after": 10 + amount * len(answered)}]


def test_an_mcp_loop_http_agent_runs_its_tools_on_each_dialogs_database(runner, shop, tmp_path):
    user = ToolUser(amount=5)
    agent = Served(mcp_loop_agent(user))
    try:
        result = run(runner, shop, tmp_path / "ws", "--agent", "http", "--set", f"agent.with.url={agent.base}/chat",
                     "--set", "agent.with.tools=mcp")
    finally:
        agent.close()
    assert result.exit_code == 0, result.output
    items = dialogs(tmp_path / "ws")
    assert_calls_in_transcript_and_diff(items, 5)
    assert all(names == ["get_customer", "add_credit"] for names in user.listed)
    preflight, *dialog_urls = user.urls
    assert len(set(dialog_urls)) == len(items), "one URL per dialog, the same for its turns"
    assert preflight not in dialog_urls and all(u.startswith("http://127.0.0.1:") for u in user.urls)
    assert user.ended_status and set(user.ended_status) == {404}, "a finished conversation's URL was served"
    # the pre-flight's own call ran on a throwaway copy of the seed database: no dialog saw it
    assert all(i["value"]["db_diff"]["tables"]["customers"]["changed"]["c1"][0]["before"] == 10 for i in items)


def test_an_a2a_agent_runs_its_tools_through_the_mcp_url_in_its_metadata(runner, shop, tmp_path):
    user = ToolUser(amount=7)
    metadata: list[dict] = []
    agent = Served(a2a_agent(user, metadata))
    try:
        result = run(runner, shop, tmp_path / "ws", "--agent", "a2a", "--set", f"agent.with.url={agent.base}")
    finally:
        agent.close()
    assert result.exit_code == 0, result.output
    items = dialogs(tmp_path / "ws")
    assert_calls_in_transcript_and_diff(items, 7)
    assert "(version 3.1)" in result.stdout  # the card's version is the agent's identity
    sent = [t["content"] for i in items for t in i["value"]["turns"] if t["role"] == "user" and t["delivered"]]
    assert sorted(m["text"] for m in metadata) == sorted(sent)  # each user message, as the A2A message
    for m in metadata:  # the endpoint, in the request's metadata and the message's
        assert m["request"]["intellagent/mcp"] == m["message"]["intellagent/mcp"]
        assert m["request"]["intellagent/mcp"]["transport"] == "streamable_http"
    by_url: dict[str, set[str]] = {}
    for m in metadata:
        by_url.setdefault(m["request"]["intellagent/mcp"]["url"], set()).add(m["context"])
    assert len(by_url) == len(items) and all(len(c) == 1 for c in by_url.values()), \
        "one URL and one A2A context per dialog"


@pytest.mark.parametrize("agent", [
    lambda port: ["--agent", "http", "--set", f"agent.with.url=http://127.0.0.1:{port}/chat",
                  "--set", "agent.with.tools=mcp"],
    lambda port: ["--agent", "a2a", "--set", f"agent.with.url=http://127.0.0.1:{port}"],
], ids=["http-mcp", "a2a"])
def test_an_agent_that_cannot_be_reached_fails_the_preflight(runner, shop, tmp_path, agent):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run(runner, shop, tmp_path / "ws", *agent(port))
    assert result.exit_code == 2, result.output
    assert "connection refused" in result.stderr and f"127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    db = tmp_path / "ws" / "intellagent.db"
    assert not db.exists() or sqlite3.connect(db).execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == 0


MORE_TOOLS = """\
  - name: transfer_to_human
    description: Hand the conversation to a human.
    terminal: true
    implementation: impl.py:transfer
    parameters: {type: object, properties: {}}
  - name: slow_lookup
    description: Look up, slowly.
    implementation: impl.py:slow_lookup
    timeout: 0.3
    parameters: {type: object, properties: {}}
"""

MORE_IMPL = """

def transfer(db):
    return "transferred"


def slow_lookup(db):
    __import__("time").sleep(2)
    return "too late"
"""


def test_mcp_calls_go_through_the_dialogs_toolbox_and_end_with_it(shop):
    (shop / "tools.yaml").write_text((shop / "tools.yaml").read_text() + MORE_TOOLS)
    (shop / "impl.py").write_text((shop / "impl.py").read_text() + MORE_IMPL)
    env = load_environment(shop)

    async def scenario():
        server = ToolServer(env)
        await server.start()
        offload = Offload(2)
        db = env.seed_database()
        box = ToolBox(env, db, offload=offload)
        dialog = server.open(box)
        try:
            async with Client(dialog.url) as tools:
                outside = await tools.call_tool("add_credit", {"customer_id": "c1", "amount": 1})
                with dialog.turn():
                    bad = await tools.call_tool("add_credit", {"customer_id": "c1", "amount": 0})
                    refused = await tools.call_tool("add_credit", {"customer_id": "c1", "amount": 995})
                    written = await tools.call_tool("add_credit", {"customer_id": "c1", "amount": 3})
                    unknown = await tools.call_tool("drop_tables", {})
                    ended = await tools.call_tool("transfer_to_human", {})
                    after = await tools.call_tool("get_customer", {"customer_id": "c1"})
            server.close_dialog(dialog)
            gone = await asyncio.to_thread(status_of, dialog.url)
            other = server.open(ToolBox(env, env.seed_database(), offload=offload))
            served = await asyncio.to_thread(status_of, other.url)
            async with Client(other.url) as tools:
                with other.turn():
                    slow = await tools.call_tool("slow_lookup", {})
                    next_one = await tools.call_tool("get_customer", {"customer_id": "c1"})
        finally:
            await server.close()
            offload.close()
        return box, db, outside, bad, refused, written, unknown, ended, after, gone, served, other.toolbox, slow, next_one

    box, db, outside, bad, refused, written, unknown, ended, after, gone, served, hung, slow, next_one = \
        asyncio.run(scenario())
    assert outside.is_error and "only while IntellAgent waits" in outside.content[0].text
    assert bad.is_error and "invalid arguments" in bad.content[0].text  # the tool's own schema
    assert refused.is_error and "credit limit exceeded" in refused.content[0].text  # rolled back
    assert not written.is_error and json.loads(written.content[0].text)["credit"] == 13
    assert unknown.is_error and "unknown tool" in unknown.content[0].text
    assert not ended.is_error and box.terminal_called
    assert after.is_error and "has ended" in after.content[0].text
    assert [(r.name, r.error) for r in box.records] == [
        ("add_credit", True), ("add_credit", True), ("add_credit", False), ("drop_tables", True),
        ("transfer_to_human", False)]  # refused calls never reach the toolbox
    assert db.get("customers", "c1")["credit"] == 13
    assert gone == 404 and served == 200
    # a tool that outlasts its timeout: the agent is told, and the dialog's database takes no more
    assert slow.is_error and "'slow_lookup' did not return within 0.3 s" in slow.content[0].text
    assert hung.hung and next_one.is_error and "has ended" in next_one.content[0].text
    assert [r.name for r in hung.records] == []


def test_an_a2a_dialog_keeps_its_context_and_each_turn_has_its_own_calls(shop):
    from intellagent.session import LiveSession
    from intellagent_plugins.agents.a2a_agent import A2AAgent, A2AConfig

    env = load_environment(shop)
    user = ToolUser(amount=2)
    metadata: list[dict] = []
    served = Served(a2a_agent(user, metadata))

    async def dialog():
        config = A2AConfig(url=served.base)
        setup = await A2AAgent.prepare(config, env)
        offload = Offload(2)
        db = env.seed_database()
        agent = A2AAgent(config, ctx=None)
        agent.setup = setup
        session = LiveSession(agent, ToolBox(env, db, offload=offload), env.prompt)
        try:
            first = await session.respond("Hello, add credit please.")
            second = await session.respond("And once more.")
        finally:
            session.close()
            offload.close()
            await setup.close()
        return first, second, session, db.get("customers", "c1")["credit"]

    try:
        first, second, session, credit = asyncio.run(dialog())
    finally:
        served.close()
    assert first.error is None and second.error is None
    assert first.content == "credit is now 12" and second.content == "credit is now 14"
    assert [c.name for c in first.tool_calls] == [c.name for c in second.tool_calls] == ["get_customer", "add_credit"]
    assert credit == 14
    assert [m["text"] for m in metadata] == ["Hello, add credit please.", "And once more."]
    assert metadata[0]["context"] and metadata[1]["context"] == metadata[0]["context"]
    assert len({m["request"]["intellagent/mcp"]["url"] for m in metadata}) == 1
    # the agent's own calls are in the conversation, as if it had asked for them
    roles = [m["role"] for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant",
                     "user", "assistant", "tool", "tool", "assistant"]


@pytest.mark.parametrize("status,infra", [(500, False), (501, False), (502, True), (503, True),
                                          (504, True), (429, True), (401, False)])
def test_an_a2a_agent_crashing_is_its_error_and_a_gateway_fault_is_infra(status, infra):
    import httpx
    from a2a.client import A2AClientError

    from intellagent_plugins.agents.a2a_agent import _unreachable

    request = httpx.Request("POST", "http://127.0.0.1:1/")
    response = httpx.Response(status, request=request, text="Traceback (most recent call last): ...")
    try:
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as cause:
            raise A2AClientError(f"HTTP Error {status}") from cause
    except A2AClientError as exc:
        found = _unreachable(exc)
    assert (found is not None) == infra
    assert found is None or found.cause == f"HTTP {status}"
