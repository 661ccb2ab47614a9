"""Dialogs reuse a provider's prompt cache, checked on the wire: the request bodies the local test
server receives. Each call of the simulated user and of the agent resends the previous call of
its role in that dialog byte for byte and appends to it (tools and every other field unchanged),
a re-ask after invalid output too; the agent's model is shown the tools as the environment
declares them; and the cached prompt tokens the server reports are recorded per call and summed
in report.json (and the test server's prompt cache, like a provider's, holds a prefix of the
whole prompt, tools first)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import urllib.request
from collections import defaultdict
from typing import Any

from pydantic import BaseModel

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer
from intellagent_plugins.reporters.writers import read_report
from tests.conftest import REPO, TAU_BENCH

USER_TURNS = 3


def sent(body: bytes, field: str) -> str:
    """The JSON text of ``field`` exactly as it was sent in ``body``."""
    text = body.decode()
    start = text.index(f'"{field}": ') + len(field) + 4
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[start:end]


def role(request: dict[str, Any]) -> str:
    """The simulated user (instructor's forced tool call) or the agent (the environment's tools)."""
    choice = request.get("tool_choice")
    return choice["function"]["name"] if isinstance(choice, dict) else "agent"


def scripted_user(request: dict[str, Any]) -> dict[str, Any] | None:
    """The simulated user says something new each turn and stops after USER_TURNS messages; the
    agent's answers are the server's own (a tool call half of the time, else text)."""
    if role(request) != "UserTurn":
        return None
    said = sum(1 for m in request["messages"] if m["role"] == "assistant")
    turn = {"thought": f"private plan {said}", "message": f"message {said}",
            "stop": "continue" if said < USER_TURNS else "success", "reason": ""}
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call_{said}", "type": "function",
        "function": {"name": "UserTurn", "arguments": json.dumps(turn)}}]}


def test_every_dialog_call_resends_the_previous_one_of_its_role_and_appends(runner, tmp_path):
    with OpenAIServer(responder=scripted_user, prompt_cache=True) as server:
        result = runner.invoke(cli, [
            "run", "airline", "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "airline"),
            "--model", "gpt-4o-mini", "--set", f"llm.default.base_url={server.base_url}",
            "--set", "steps.tasks.with.indices=[0, 1, 2]", "--workspace", str(tmp_path), "--quiet"])
        bodies = list(server.bodies)
    assert result.exit_code in (0, 1), result.output
    dialogs: dict[tuple[str, int], list[bytes]] = defaultdict(list)  # (role, the dialog's seed)
    for body in bodies:
        request = json.loads(body)
        if request.get("seed") is not None:  # (not the structured-output probe)
            dialogs[role(request), request["seed"]].append(body)
    assert {r for r, _ in dialogs} == {"UserTurn", "agent"}
    assert len(dialogs) == 6  # three dialogs, each a user and an agent
    pairs = 0
    for calls in dialogs.values():
        for previous, current in zip(calls, calls[1:]):
            before, after = sent(previous, "messages"), sent(current, "messages")
            assert after.startswith(before[:-1]) and len(after) > len(before)
            rest = {k: v for k, v in json.loads(current).items() if k != "messages"}
            assert rest == {k: v for k, v in json.loads(previous).items() if k != "messages"}
            pairs += 1
    assert pairs >= 3 * 2  # (a dialog may end early: the agent hands it to a human)
    # the user's view holds what it said, never its private thoughts
    assert not any(b"private plan" in body for calls in dialogs.values() for body in calls)

    # the cached prompt tokens the server reported: recorded per call, summed in report.json
    calls = Store.for_workspace(tmp_path).calls()
    assert sum(c.cached_tokens > 0 for c in calls) >= pairs
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    assert sum(r["cached_tokens"] for r in report["cost"]) == sum(c.cached_tokens for c in calls) > 0
    # and report.html's table of tokens and cost shows them
    page = next(tmp_path.glob("runs/*/report.html")).read_text()
    table = page[page.index("<section id=cost>"):page.index("</section>", page.index("<section id=cost>"))]
    assert "from the prompt cache" in table
    for row in report["cost"]:
        assert f"<td class=num>{row['prompt_tokens']}</td><td class=num>{row['cached_tokens']}</td>" in table


def test_the_agents_model_reads_the_tools_as_the_environment_declares_them():
    env = load_environment(REPO / "environments" / "airline")
    declared = [tool.openai_schema() for tool in env.tools.values()]
    with OpenAIServer() as server:
        llm = LLM(LLMSettings(default=ModelSettings(model="gpt-4o-mini", base_url=server.base_url)))
        outcome = asyncio.run(llm.chat([{"role": "user", "content": "Hi"}], tools=declared))
        body = server.bodies[0]
    assert outcome.ok
    # key order included: the model is shown each tool's parameters in the declared order
    assert sent(body, "tools") == json.dumps(declared, ensure_ascii=False, separators=(",", ":"))
    properties = list(json.loads(sent(body, "tools"))[0]["function"]["parameters"]["properties"])
    assert properties == list(declared[0]["function"]["parameters"]["properties"]) != sorted(properties)


class Answer(BaseModel):
    number: int
    reason: str


def test_a_reask_resends_the_conversation_byte_for_byte():
    conversation = [{"role": "system", "content": "You count."},
                    {"role": "user", "content": "How many?"},
                    {"role": "assistant", "content": "Of what?"},
                    {"role": "user", "content": "Apples."}]
    with OpenAIServer() as server:
        server.schedule("invalid")  # the first answer does not fit: instructor asks again
        llm = LLM(LLMSettings(default=ModelSettings(model="gpt-4o-mini", base_url=server.base_url,
                                                    structured="tools")))
        outcome = asyncio.run(llm.structured(conversation, Answer))
        first, reask = server.bodies
    assert outcome.ok
    before, after = sent(first, "messages"), sent(reask, "messages")
    assert len(json.loads(after)) > len(conversation)
    assert after.startswith(before[:-1])


def cached_tokens(url: str, request: dict[str, Any]) -> int:
    body = json.dumps(request).encode()
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, no proxy
    with direct.open(urllib.request.Request(url + "/chat/completions", data=body,
                                            headers={"Content-Type": "application/json"}), timeout=10) as answer:
        return json.load(answer)["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)


def test_the_test_servers_prompt_cache_holds_a_prefix_of_the_whole_prompt_tools_first():
    """As a provider's: a request that resends an earlier one's messages with other tools (or
    the same tools in another order), or to another model, reads nothing from the cache."""
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in "ab"]
    first = {"model": "m", "tools": tools, "messages": [{"role": "system", "content": "x" * 400},
                                                        {"role": "user", "content": "hi"}]}
    longer = {**first, "messages": first["messages"] + [{"role": "assistant", "content": "hello"},
                                                        {"role": "user", "content": "and then?"}]}
    with OpenAIServer(prompt_cache=True) as server:
        assert cached_tokens(server.base_url, first) == 0
        assert cached_tokens(server.base_url, {**longer, "tools": tools[::-1]}) == 0
        assert cached_tokens(server.base_url, {**longer, "model": "other"}) == 0
        assert cached_tokens(server.base_url, longer) > 100


def test_the_standalone_test_server_reports_cached_prompt_tokens_when_asked():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "intellagent.testing.openai_server", "--port", str(port),
                             "--prompt-cache"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        messages = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "hi"}]
        assert cached_tokens(url, {"model": "m", "messages": messages}) == 0
        assert cached_tokens(url, {"model": "m", "messages": messages + [
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]}) > 100
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


class DeepSeekLike(OpenAIServer):
    """Reports its prompt cache as DeepSeek's OpenAI-compatible API does:
    ``usage.prompt_cache_hit_tokens`` (and ``prompt_cache_miss_tokens``), no ``prompt_tokens_details``."""

    def _completion(self, request: dict[str, Any], *, invalid: bool) -> dict[str, Any]:
        answer = super()._completion(request, invalid=invalid)
        usage = answer["usage"]
        hit = usage.pop("prompt_tokens_details")["cached_tokens"]
        usage.update(prompt_cache_hit_tokens=hit, prompt_cache_miss_tokens=usage["prompt_tokens"] - hit)
        return answer


def test_cached_tokens_are_read_where_deepseek_reports_them(tmp_path):
    history = [{"role": "system", "content": "x" * 4000}, {"role": "user", "content": "hi"}]
    longer = history + [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "and then?"}]
    with DeepSeekLike(prompt_cache=True) as server:
        llm = LLM(LLMSettings(default=ModelSettings(model="deepseek-chat", base_url=server.base_url,
                                                    structured="tools"), cache=False),
                  store=Store.for_workspace(tmp_path))

        async def calls():
            return [await llm.chat(history), await llm.chat(longer),
                    await llm.structured(history, Answer), await llm.structured(longer, Answer)]

        chat, chat_again, structured, structured_again = asyncio.run(calls())
    assert chat.usage.cached_tokens == 0 and chat_again.usage.cached_tokens > 900
    assert structured.usage.cached_tokens == 0 and structured_again.usage.cached_tokens > 900
    assert [c.cached_tokens for c in llm.store.calls()] == [
        0, chat_again.usage.cached_tokens, 0, structured_again.usage.cached_tokens]
