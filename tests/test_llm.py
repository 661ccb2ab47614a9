"""The LLM layer: mock models, the real openai + instructor path over HTTP against the local
server, every fault kind, limits, the budget, the cache and the call log."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, create_model, field_validator
from pydantic.json_schema import GenerateJsonSchema

from intellagent.cli import cli
from intellagent.errors import ConfigError
from intellagent.llm import LLM, ResponseModel, Status
from intellagent.llm.types import schema_of
from intellagent.llm.types import ChatRequest
from intellagent.llm.errors import RealModelForbidden
from intellagent.pipeline import LLMSettings, ModelSettings, PipelineSpec, Price
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer
from intellagent.yamlio import load_model
from intellagent_plugins.providers.mock import SchemaModel

USER = [{"role": "user", "content": "List the policies."}]


class Policy(BaseModel):
    name: str = Field(min_length=3, max_length=30)
    category: Literal["privacy", "payment", "escalation"]
    challenge: int = Field(ge=1, le=5)
    tags: list[str] = Field(min_length=1, max_length=3)
    weight: float = Field(ge=0, le=1)


class Policies(BaseModel):
    policies: list[Policy] = Field(min_length=2, max_length=4)
    notes: str | None = None


class Verdict(BaseModel):
    passed: bool
    reason: str


TOOL = {"type": "function", "function": {"name": "lookup", "description": "Find an order.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 3}},
            "required": ["order_id", "qty"]}}}


def run(coro):
    return asyncio.run(coro)


def http_llm(server: OpenAIServer, store: Store | None = None, **settings) -> LLM:
    timeout = settings.pop("request_timeout", None)
    # these tests schedule faults for the first requests: no probe of the structured mode before them
    model = ModelSettings(model="gpt-4o-mini", base_url=server.base_url, timeout=timeout, structured="tools")
    settings.setdefault("backoff_base", 0.01)
    return LLM(LLMSettings(default=model, **settings), seed=7, store=store)


# -- mock/schema ---------------------------------------------------------------------------------

def test_mock_schema_fabricates_valid_deterministic_instances():
    first = run(LLM(seed=1).structured(USER, Policies))
    again = run(LLM(seed=1).structured(USER, Policies))
    other_seed = run(LLM(seed=2).structured(USER, Policies))
    other_request = run(LLM(seed=1).structured(USER + [{"role": "user", "content": "more"}], Policies))
    assert first.ok and first.value == again.value
    assert first.value != other_seed.value and first.value != other_request.value
    for value in (first.value, other_seed.value, other_request.value):
        assert 2 <= len(value.policies) <= 4
        for p in value.policies:
            assert p.category in ("privacy", "payment", "escalation") and 1 <= p.challenge <= 5


def test_mock_schema_builds_a_models_schema_once(monkeypatch):
    """The mock model fabricates from the schema the cache key was made from: pydantic's walk
    of the model (milliseconds, and cyclic garbage) is not made again for every call."""
    built = []
    generate = GenerateJsonSchema.generate
    monkeypatch.setattr(GenerateJsonSchema, "generate",
                        lambda self, *a, **k: built.append(1) or generate(self, *a, **k))
    model = create_model("Fresh", policies=(list[Policies], ...))  # a class no other test has asked about
    llm = LLM(seed=3)
    outcomes = [run(llm.structured(USER + [{"role": "user", "content": f"q{i}"}], model)) for i in range(5)]
    assert all(o.ok for o in outcomes) and len({o.value.model_dump_json() for o in outcomes}) > 1
    assert len(built) == 1


def test_mock_schema_chat_text_and_valid_tool_calls():
    llm = LLM(seed=0)
    calls = [run(llm.chat([{"role": "user", "content": f"q{i}"}], tools=[TOOL])).value for i in range(20)]
    tool_calls = [c.tool_calls[0] for c in calls if c.tool_calls]
    texts = [c.content for c in calls if not c.tool_calls]
    assert tool_calls and texts
    for call in tool_calls:
        assert call.name == "lookup"
        jsonschema.validate(json.loads(call.arguments), TOOL["function"]["parameters"])
    after_tool = run(llm.chat([{"role": "user", "content": "q"}, {"role": "tool", "content": "{}",
                                                                  "tool_call_id": "x"}], tools=[TOOL]))
    assert after_tool.value.content and not after_tool.value.tool_calls


def test_mock_schema_honours_string_patterns():
    class Codes(BaseModel):
        symbol: str = Field(pattern=r"^[A-Z]{1,2}\d{1,2}$")
        order: str = Field(pattern=r"^#W\d{7}$")
        answer: str = Field(pattern=r"^(yes|no)$")

    for i in range(10):
        value = run(LLM(seed=i).structured(USER, Codes)).value
        assert value is not None and value.order.startswith("#W") and value.answer in ("yes", "no")


def test_mock_schema_reports_models_it_cannot_satisfy():
    class Impossible(BaseModel):
        code: str

        @field_validator("code")
        @classmethod
        def never(cls, value):
            raise ValueError("no code is good enough")

    outcome = run(LLM().structured(USER, Impossible))
    assert outcome.status is Status.invalid_output
    assert "could not fabricate a valid Impossible" in outcome.error
    assert "code: Value error, no code is good enough" in outcome.error


# -- mock/scripted and mock/function -------------------------------------------------------------

def test_scripted_replies_in_order_and_records_requests(scripted_llm):
    llm, model = scripted_llm("hello", {"tool_calls": [{"name": "lookup", "arguments": {"order_id": "A", "qty": 1}}]},
                              {"passed": True, "reason": "ok"})
    assert run(llm.chat(USER)).value.content == "hello"
    reply = run(llm.chat(USER, tools=[TOOL])).value
    assert reply.tool_calls[0].name == "lookup" and json.loads(reply.tool_calls[0].arguments)["qty"] == 1
    assert run(llm.structured(USER, Verdict)).value == Verdict(passed=True, reason="ok")
    assert len(model.history) == 3 and model.history[1].tools == [TOOL]
    empty = run(llm.chat(USER))
    assert empty.status is Status.infra_error and "no reply left" in empty.error  # not the model's output


def test_scripted_validation_retry_feeds_the_error_back(scripted_llm):
    llm, model = scripted_llm({"passed": "maybe"}, {"passed": False, "reason": "fixed"})
    outcome = run(llm.structured(USER, Verdict))
    assert outcome.ok and outcome.value.reason == "fixed"
    assert "Fix these errors" in model.history[1].messages[-1]["content"]
    assert "reason" in model.history[1].messages[-1]["content"]


def test_scripted_validation_retries_are_bounded(scripted_llm):
    llm, model = scripted_llm({"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}, validation_retries=1)
    outcome = run(llm.structured(USER, Verdict))
    assert outcome.status is Status.invalid_output and "after 2 attempts" in outcome.error
    assert len(model.history) == 2 and len(model.queue) == 2
    # both answers were generated and paid for: the failed call still counts their tokens
    assert outcome.usage.completion_tokens >= 2 and llm.store.calls()[-1].prompt_tokens > 0


def reply_with_length(request, response_model):
    text = request.messages[-1]["content"]
    if response_model is None:
        return f"{len(text)} characters"
    return {"passed": len(text) > 5, "reason": text}


def test_function_model_from_yaml(tmp_path, monkeypatch):
    (tmp_path / "llm.yaml").write_text(
        "default: {model: mock/function, options: {function: 'tests.test_llm:reply_with_length'}}\n")
    llm = LLM(load_model(LLMSettings, tmp_path / "llm.yaml"))
    assert run(llm.chat([{"role": "user", "content": "abc"}])).value.content == "3 characters"
    assert run(llm.structured([{"role": "user", "content": "long enough"}], Verdict)).value.passed


def test_scripted_model_from_yaml(tmp_path):
    (tmp_path / "llm.yaml").write_text(
        "default:\n  model: mock/scripted\n  options:\n    replies: [first, second]\n")
    llm = LLM(load_model(LLMSettings, tmp_path / "llm.yaml"))
    assert [run(llm.chat(USER)).value.content for _ in range(2)] == ["first", "second"]


def test_roles_and_model_override():
    settings = LLMSettings(default=ModelSettings(model="mock/schema"),
                           roles={"critic": ModelSettings(model="mock/scripted", options={"replies": ["c"]})})
    llm = LLM(settings)
    assert llm.settings_for("critic").model == "mock/scripted"
    assert llm.settings_for("user").model == "mock/schema"
    assert run(llm.chat(USER, role="critic")).value.content == "c"
    overridden = LLM(settings.with_model("mock/function"))
    assert overridden.settings_for("critic").model == "mock/function"
    assert overridden.settings_for("user").model == "mock/function"


def test_literal_api_keys_are_refused_in_yaml(tmp_path):
    (tmp_path / "p.yaml").write_text("steps: {graph: {use: policy-graph}}\nllm:\n  default:\n"
                                     "    model: gpt-4o\n    api_key: sk-abc123\n")
    with pytest.raises(ConfigError) as info:
        load_model(PipelineSpec, tmp_path / "p.yaml")
    assert "p.yaml:5" in str(info.value) and "api_key_env" in str(info.value)
    assert "sk-abc123" not in str(info.value)


def test_real_models_are_forbidden_in_tests():
    llm = LLM(LLMSettings(default=ModelSettings(model="gpt-4o")))
    with pytest.raises(RealModelForbidden, match="INTELLAGENT_OFFLINE"):
        run(llm.chat(USER))
    remote = LLM(LLMSettings(default=ModelSettings(model="m", base_url="http://10.1.2.3:8000/v1")))
    with pytest.raises(RealModelForbidden):
        run(remote.chat(USER))


# -- the real client over HTTP -------------------------------------------------------------------

def test_http_structured_chat_and_tools(openai_server):
    llm = http_llm(openai_server)
    structured = run(llm.structured(USER, Policies, stage="extract"))
    assert structured.ok, structured.error
    assert isinstance(structured.value, Policies) and structured.usage.prompt_tokens > 0
    request = openai_server.requests[-1]
    assert request["tool_choice"]["function"]["name"] == "Policies"  # instructor's TOOLS mode
    assert request["model"] == "gpt-4o-mini" and request["seed"] == 7

    chat = run(llm.chat(USER))
    assert chat.ok and chat.value.content.startswith("Test server reply")
    tool_replies = [run(llm.chat([{"role": "user", "content": f"q{i}"}], tools=[TOOL])).value
                    for i in range(10)]
    calls = [r.tool_calls[0] for r in tool_replies if r.tool_calls]
    assert calls, "the server should have called the tool at least once"
    jsonschema.validate(json.loads(calls[0].arguments), TOOL["function"]["parameters"])
    assert openai_server.requests[-1]["tools"] == [TOOL]
    run(llm.aclose())


def test_the_key_text_is_one_sorted_json_of_the_fields_and_the_body_reuses_it(openai_server):
    """The cache key's text is made field by field and kept for the body: it must stay the text of
    one compact sorted ``json.dumps`` of every field, and the body must carry the same
    conversation the key names, and the tools as they were given (their parameters' order is
    what the model reads)."""
    messages = [{"role": "system", "content": "Réservez — 東京 \"q\""},
                {"role": "user", "content": "x", "name": "u", "extra": [1, 2.5, None, {"b": 1, "a": True}]}]
    requests = [ChatRequest(model="m", messages=messages),
                ChatRequest(model="m", messages=messages, tools=[TOOL], tool_choice="auto", temperature=0.2,
                            response_schema={"type": "object", "b": [1], "a": {}}, seed=3, sample="s/1",
                            endpoint={"base_url": "http://127.0.0.1:1/v1", "options": {"z": 1, "y": None}}),
                ChatRequest(model="m", messages=[{"role": "user", "content": "big", "n": 2 ** 64}])]
    for request in requests:
        fields = {name: getattr(request, name) for name in type(request).model_fields}
        assert request.canonical() == json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str,
                                                 separators=(",", ":"))
        assert request.legacy_key() == hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()

    llm = http_llm(openai_server)
    assert run(llm.chat(messages, tools=[TOOL])).ok and run(llm.structured(messages, Policies)).ok
    chat, structured = openai_server.bodies[-2:]
    for raw, parsed in zip((chat, structured), openai_server.requests[-2:]):
        assert parsed["messages"] == messages and parsed["model"] == "gpt-4o-mini"
        # the key's own text of the conversation, not a second encoding of it
        assert json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() in raw
    assert json.dumps([TOOL], ensure_ascii=False, separators=(",", ":")).encode() in chat
    assert openai_server.requests[-1]["tools"][0]["function"]["name"] == "Policies"
    run(llm.aclose())


def test_a_store_made_before_compact_keys_still_answers_from_its_cache(openai_server, tmp_path):
    """Answers cached under the old keys (standard separators) are found through them, copied
    under the new key, and cost no request; a store without such answers never computes them."""
    store = Store.for_workspace(tmp_path)
    assert not store.legacy_keys
    llm = http_llm(openai_server, store=store)
    request = llm._request("default", USER)
    assert request.legacy_key() != request.key()
    # an answer cached by an earlier version: under the old key, before migration 8 was applied
    store.record_answer(dict(run_id=None, stage=None, role="default", model=request.model, provider="openai",
                             request_hash=request.legacy_key(), kind="chat", outcome="ok"),
                        cache={"request_hash": request.legacy_key(), "model": request.model, "kind": "chat",
                               "response": json.dumps({"content": "from an old cache"}),
                               "prompt_tokens": 5, "completion_tokens": 3})
    assert not Store.for_workspace(tmp_path).legacy_keys  # written after the migration: not old
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE llm_cache SET created_at = 1.0")
    sent = len(openai_server.requests)

    old = Store.for_workspace(tmp_path)
    assert old.legacy_keys
    for _ in range(2):
        llm = http_llm(openai_server, store=old)
        out = run(llm.chat(USER))
        run(llm.aclose())
        assert out.ok and out.cached and out.value.content == "from an old cache"
    assert len(openai_server.requests) == sent
    assert old.cached(request.key()).response == json.dumps({"content": "from an old cache"})

    fresh = Store.for_workspace(tmp_path / "new")
    llm = http_llm(openai_server, store=fresh)
    out = run(llm.chat(USER))
    run(llm.aclose())
    assert out.ok and not out.cached and len(openai_server.requests) == sent + 1


def test_http_invalid_output_is_reasked_with_the_validation_error(openai_server):
    llm = http_llm(openai_server)
    openai_server.schedule("invalid")
    asked = json.loads(json.dumps(USER))
    outcome = run(llm.structured(asked, Verdict))
    assert outcome.ok
    retry = openai_server.requests[-1]
    assert len(openai_server.requests) == 2
    assert asked == USER  # the re-ask went into the request, not into the caller's conversation
    feedback = json.dumps(retry["messages"][len(USER):])
    assert "passed" in feedback and ("Field required" in feedback or "validation" in feedback.lower())
    # the call's tokens are both answers' (the server counts a quarter of the prompt's JSON)
    prompts = [openai_server.prompt_tokens(r) for r in openai_server.requests]
    assert outcome.usage.prompt_tokens == sum(prompts) and outcome.usage.completion_tokens >= 2
    [row] = llm.store.calls()
    assert row.prompt_tokens == sum(prompts)


@pytest.mark.parametrize("fault", ["429", "500", "503", "reset", "timeout", "malformed", "invalid"])
def test_each_fault_once_is_recovered(fault):
    with OpenAIServer(timeout_hang=5) as server:
        llm = http_llm(server, request_timeout=0.5)
        server.schedule(fault)
        outcome = run(llm.structured(USER, Verdict))
        assert outcome.ok, (fault, outcome.error)
        assert server.faults_sent[fault] == 1
        assert len(server.requests) == 2
        [row] = llm.store.calls()
        assert row.outcome == "ok"


@pytest.mark.parametrize("fault,kind", [("429", "rate-limited"), ("500", "server-error"),
                                        ("503", "server-error"), ("reset", "connection"),
                                        ("timeout", "timeout")])
def test_persistent_faults_end_in_an_infra_error_status(fault, kind):
    with OpenAIServer(timeout_hang=5, retry_after=0.01) as server:
        llm = http_llm(server, request_timeout=0.3, max_retries=2)
        server.schedule(*[fault] * 3)
        outcome = run(llm.chat(USER, stage="simulate"))
        assert outcome.status is Status.infra_error
        assert outcome.error.startswith(kind) and "after 3 attempts" in outcome.error
        assert outcome.value is None and outcome.attempts == 3
        [row] = llm.store.calls()
        assert row.outcome == "infra-error" and row.error == outcome.error and row.stage == "simulate"


def test_the_standalone_test_server_counts_requests_without_keeping_them():
    """A server that serves a long benchmark keeps no request (each is ~35 KB: 2 GB after
    60,000), yet still reports how many it served when stopped; it listens on the port it is
    given (a benchmark's model, base URL included, is then the same from run to run)."""
    with OpenAIServer(keep_requests=False) as server:
        llm = http_llm(server)
        for i in range(3):
            assert run(llm.chat([{"role": "user", "content": f"hello {i}"}])).ok
        assert server.served == 3 and server.requests == [] and server.bodies == []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "intellagent.testing.openai_server", "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}/v1"
        for i in range(2):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": str(i)}]}).encode()
            request = urllib.request.Request(url + "/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, no proxy
            with direct.open(request, timeout=10) as answer:
                assert json.load(answer)["choices"]
    finally:
        proc.terminate()
    stats = json.loads(proc.communicate(timeout=10)[0].strip().splitlines()[-1])
    assert stats["requests"] == 2
    with socket.socket() as taken:  # a port in use: one line, exit 2, no traceback
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refused = subprocess.run([sys.executable, "-m", "intellagent.testing.openai_server", "--port",
                                  str(taken.getsockname()[1])], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "address already in use" in refused.stderr, refused.stderr


def test_the_standalone_test_server_can_be_stopped_as_soon_as_it_prints_its_url():
    """The URL line means the server is ready, including to be stopped: its SIGTERM handler is in
    place when the URL is printed (it used to come after, so a caller that stopped it at once
    under load killed it before it could say how many requests it served)."""
    watch = ("import signal, intellagent.testing.openai_server as server\n"
             "def watched(*args, **kwargs):\n"
             "    if args and str(args[0]).startswith('http://'):\n"
             "        print('SIGTERM handled' if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL\n"
             "              else 'SIGTERM not handled yet', flush=True)\n"
             "    print(*args, **kwargs)\n"
             "server.print = watched\n"
             "server.main()\n")
    proc = subprocess.Popen([sys.executable, "-c", watch], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "SIGTERM handled"
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
    finally:
        proc.terminate()
    out = proc.communicate(timeout=10)[0]
    assert proc.returncode == 0 and json.loads(out.strip().splitlines()[-1])["requests"] == 0


def test_persistent_invalid_output_is_its_own_status_naming_every_failed_field():
    with OpenAIServer() as server:
        llm = http_llm(server, validation_retries=1)
        server.schedule("invalid", "invalid")
        outcome = run(llm.structured(USER, Verdict))
        assert outcome.status is Status.invalid_output  # the model's fault, not the infrastructure's
        assert outcome.error.startswith("invalid-output: output did not fit Verdict after 2 attempts")
        # every field that failed and why, not only pydantic's first line
        assert "validation errors" in outcome.error
        assert "passed: Field required" in outcome.error and "reason: Field required" in outcome.error
        [row] = llm.store.calls()
        assert row.outcome == "invalid-output" and row.error == outcome.error


class NeverAnswers:
    """A model endpoint that takes every request and never answers."""

    cacheable = False

    def __init__(self) -> None:
        self.calls = self.cancelled = 0

    async def chat(self, request):
        self.calls += 1
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


def test_the_per_call_timeout_ends_a_request_that_never_answers_and_cancels_it():
    llm = LLM(LLMSettings(default=ModelSettings(model="m", timeout=0.2), max_retries=1, backoff_base=0.01))
    endpoint = llm._by_role["default"] = NeverAnswers()
    started = time.perf_counter()
    out = run(llm.chat(USER))
    assert out.status is Status.infra_error and out.attempts == 2
    assert "no answer within 0.2 s (llm.default.timeout)" in out.error  # the limit hit and where it is set
    assert endpoint.calls == endpoint.cancelled == 2 and time.perf_counter() - started < 2


def test_rejected_requests_are_not_retried():
    with OpenAIServer(faults=["400"]) as server:
        model = ModelSettings(model="m", base_url=server.base_url)
        llm = LLM(LLMSettings(default=model, backoff_base=0.01))
        outcome = run(llm.chat(USER))
        assert outcome.status is Status.infra_error and outcome.error.startswith("rejected: 400")
        assert outcome.attempts == 1 and len(server.requests) == 1


def test_retry_after_is_honoured():
    with OpenAIServer(retry_after=0.4) as server:
        llm = http_llm(server, backoff_base=0.001)
        server.schedule("429")
        started = time.perf_counter()
        assert run(llm.chat(USER)).ok
        assert time.perf_counter() - started >= 0.4


def test_backoff_grows_exponentially_with_jitter():
    llm = LLM(LLMSettings(backoff_base=1.0, backoff_max=8.0))
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = {llm._backoff(attempt, None) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(delays) > 1
    assert llm._backoff(1, retry_after=5.0) == 5.0


def test_concurrency_limit_is_shared():
    with OpenAIServer(latency=0.1) as server:
        llm = http_llm(server, max_concurrency=3)

        async def many():
            return await asyncio.gather(*[llm.chat([{"role": "user", "content": str(i)}])
                                          for i in range(12)])

        outcomes = run(many())
        assert all(o.ok for o in outcomes)
        assert server.max_in_flight == 3


def test_requests_per_minute_limit(monkeypatch):
    from intellagent.llm.limits import RateLimiter

    monkeypatch.setattr(RateLimiter, "WINDOW", 0.5)
    llm = LLM(LLMSettings(requests_per_minute=2))

    async def three():
        started = time.perf_counter()
        for i in range(3):
            await llm.chat([{"role": "user", "content": str(i)}])
        return time.perf_counter() - started

    assert run(three()) >= 0.45


# -- budget, cache, accounting -------------------------------------------------------------------

def test_budget_stops_new_calls_and_says_so():
    settings = LLMSettings(budget_usd=0.55, prices={"mock/schema": Price(input=20.0, output=20.0)})
    llm = LLM(settings)
    outcomes = [run(llm.structured([{"role": "user", "content": f"item {i}"}], Policies))
                for i in range(30)]
    made = [o for o in outcomes if o.ok]
    skipped = [o for o in outcomes if o.status is Status.budget_exhausted]
    assert made and skipped and len(made) + len(skipped) == 30
    assert outcomes.index(skipped[0]) == len(made)  # everything after the limit is skipped
    assert 0 < llm.spent_usd <= 0.55 and llm.budget_exhausted  # never overshot
    assert "budget reached" in skipped[0].error and "left unspent" in skipped[0].error
    assert "run again to resume" in skipped[0].error
    assert len(llm.store.calls()) == len(made)  # skipped calls never reached a model


def test_a_budget_of_nothing_lets_free_calls_go_and_refuses_a_priced_one():
    """$0 is a budget that spends nothing: a free model's calls are all made (it stopped the
    run before its first item), a priced one's first call is refused and nothing is spent."""
    free = LLM(LLMSettings(budget_usd=0.0))
    outcomes = [run(free.structured([{"role": "user", "content": f"item {i}"}], Policies)) for i in range(5)]
    assert all(o.ok for o in outcomes) and free.spent_usd == 0 and not free.budget_exhausted
    priced = LLM(LLMSettings(budget_usd=0.0, prices={"mock/schema": Price(input=20.0, output=20.0)}))
    outcome = run(priced.structured([{"role": "user", "content": "item 0"}], Policies))
    assert outcome.status is Status.budget_exhausted and priced.spent_usd == 0 and priced.budget_exhausted
    assert priced.store.calls() == []


def test_a_budget_too_small_for_a_call_says_what_that_call_could_cost():
    """The first call refused names its worst case, the least the budget had to leave for it;
    none made, nothing spent."""
    settings = LLMSettings(budget_usd=0.01, prices={"mock/schema": Price(input=20.0, output=20.0)})
    llm = LLM(settings)
    question = [{"role": "user", "content": "item 0"}]
    outcome = run(llm.structured(question, Policies))
    assert outcome.status is Status.budget_exhausted and llm.spent_usd == 0
    request = llm._request("default", question, response_schema=schema_of(Policies))
    worst, _ = llm._worst(request, len(request.canonical()) // 4, 1 + settings.validation_retries)
    assert worst > 0.01
    assert llm.budget_refused() == f"${worst:.4f}"
    assert f"worst case, ${worst:.4f}:" in outcome.error
    assert LLM(LLMSettings(budget_usd=0.01)).budget_refused() == ""  # nothing refused yet


def test_calls_in_flight_never_overshoot_the_budget():
    """Each attempt's worst case (its prompt and output cap) is held against the budget before
    it is sent: of a burst of 10, only as many as 2.5 worst cases pay for are in flight at once;
    the others wait for those to end (each gives back what it did not spend) and then go."""
    with OpenAIServer(latency=0.2) as server:
        llm = http_llm(server, max_concurrency=8)

        async def burst():
            assert (await llm.chat(USER)).ok  # the endpoint's first call goes alone
            request = llm._request("default", [{"role": "user", "content": "0"}])
            dollars, worst = llm._worst(request, len(request.canonical()) // 4, 1)
            llm.settings.budget_tokens = llm.spent_tokens + int(2.5 * worst)
            return await asyncio.gather(*[llm.chat([{"role": "user", "content": str(i)}])
                                          for i in range(10)])

        outcomes = run(burst())
        assert [o.status for o in outcomes].count(Status.ok) == 10  # each spends far less than its worst
        assert server.max_in_flight == 2  # what 2.5 worst cases pay for at once
        assert len(server.requests) == 11 and llm.spent_tokens <= llm.settings.budget_tokens


def test_a_budget_is_spent_until_what_is_left_cannot_pay_a_call():
    """A call refused by the budget is one whose worst case does not fit with nothing else in
    flight: the budget is spent down to less than one call's worst case, never past it, and the
    calls waiting for others to end are not refused while those could still give some back."""
    with OpenAIServer(latency=0.05) as server:
        llm = http_llm(server, max_concurrency=8)

        async def many():
            assert (await llm.chat(USER)).ok
            request = llm._request("default", [{"role": "user", "content": "0"}])
            _, worst = llm._worst(request, len(request.canonical()) // 4, 1)
            one = llm.spent_tokens  # what a call spends: far less than its worst case
            llm.settings.budget_tokens = llm.spent_tokens + worst + 10 * one
            outcomes = await asyncio.gather(*[llm.chat([{"role": "user", "content": str(i)}])
                                              for i in range(60)])
            return worst, outcomes

        worst, outcomes = run(many())
        statuses = [o.status for o in outcomes]
        made, refused = statuses.count(Status.ok), statuses.count(Status.budget_exhausted)
        # one worst case and ten calls' worth: about ten made, where holding one worst case per
        # call in flight and refusing the rest would have made one
        assert made + refused == 60 and 8 <= made <= 12 and refused > 0
        left = llm.settings.budget_tokens - llm.spent_tokens
        assert 0 <= left < worst  # spent down to less than one call's worst case, not past it
        assert llm.budget_refused() == f"{worst} tokens"


def test_a_failed_attempt_is_spent_before_its_hold_on_the_budget_ends():
    """A timed-out attempt's prompt (the server read it) counts against the budget as the
    attempt ends, while its call waits to retry: were it counted only when the call ends, the
    calls reserving in between could take room it had already used."""
    with OpenAIServer(timeout_hang=5) as server:
        llm = http_llm(server, request_timeout=0.3, backoff_base=1.0, backoff_max=1.0,
                       budget_tokens=10 ** 6)
        server.schedule("timeout")

        async def watch():
            call = asyncio.ensure_future(llm.chat(USER))
            while not server.faults_sent.get("timeout") or llm._holds:  # the attempt has ended
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.05)
            during = (llm.spent_tokens, call.done(), len(server.requests))
            return during, await call

        (spent_while_waiting, done, requests), outcome = run(watch())
        assert not done and requests == 1  # in its back-off, before the retry
        assert spent_while_waiting > 0  # the timed-out prompt is spent already
        assert outcome.ok and llm.spent_tokens == outcome.usage.total  # counted once, not twice


def sharing_a_budget(server: OpenAIServer, workspace, n: int, **settings) -> list[LLM]:
    """``n`` LLM layers on one store and run, sharing its budget, as a run's processes do."""
    store = Store.for_workspace(workspace)
    run_id = store.start_run()
    layers = [http_llm(server, store=store, **settings) for _ in range(n)]
    for llm in layers:
        llm.run_id = run_id
        llm.share_budget(store, run_id)
    return layers


def test_the_processes_of_one_run_share_its_budget(tmp_path):
    """Two LLM layers on one store and run, as a sharing executor's processes are: each holds its
    attempts' worst cases in the store's ledger, where each call leaves what it spent, so
    together they spend no more than the budget (each alone would have spent up to all of it)
    and each reads what is left after both."""
    with OpenAIServer(latency=0.05) as server:
        first = http_llm(server, store=Store.for_workspace(tmp_path), max_concurrency=4)
        first.settings.default.max_tokens = 16  # a small worst case: many holds fit at once
        assert run(first.chat(USER)).ok
        request = first._request("default", [{"role": "user", "content": "0 0"}])
        _, worst = first._worst(request, len(request.canonical()) // 4, 1)
        budget = 30 * first.spent_tokens  # about thirty calls, of the eighty asked for
        layers = sharing_a_budget(server, tmp_path, 2, max_concurrency=4, budget_tokens=budget)
        for llm in layers:
            llm.settings.default.max_tokens = 16
        store, run_id = layers[0].store, layers[0].run_id

        async def both():
            return await asyncio.gather(*[llm.chat([{"role": "user", "content": f"{n} {i}"}])
                                          for n, llm in enumerate(layers) for i in range(40)])

        outcomes = run(both())
        spent = sum(llm.spent_tokens for llm in layers)
        assert all(llm.spent_tokens > 0 for llm in layers)  # both made calls
        assert spent <= budget and budget - spent < worst  # together within it, spent down
        assert [o.status for o in outcomes].count(Status.ok) >= 15
        assert store.budget_spent(run_id)[1] == spent
        assert layers[0].budget_left() == layers[1].budget_left() == f"{budget - spent} of {budget} tokens"
        for llm in layers:
            run(llm.aclose())


def test_calls_waiting_for_room_are_not_launched_once_a_call_was_refused():
    """Once the budget refuses a call (its worst case does not fit with none in flight), the
    calls that were waiting for room are not launched either, though a smaller one would fit."""
    with OpenAIServer(latency=0.1) as server:
        llm = http_llm(server, max_concurrency=8)

        async def three():
            assert (await llm.chat(USER)).ok
            small = [{"role": "user", "content": "a"}]
            big = [{"role": "user", "content": "b" * 40_000}]  # a worst case ~13,000 tokens larger
            _, w_small = llm._worst(llm._request("default", small), 0, 1)
            llm.settings.budget_tokens = llm.spent_tokens + int(w_small * 1.5)
            other = [{"role": "user", "content": "c"}]
            return await asyncio.gather(llm.chat(small), llm.chat(big), llm.chat(other))

        first, big, second = run(three())
        assert first.ok and big.status is Status.budget_exhausted
        assert second.status is Status.budget_exhausted  # it waited behind the refused one
        assert len(server.requests) == 2  # the opening call and the first small one


def test_a_call_cancelled_while_it_waits_for_a_shared_budget_gives_its_hold_back(tmp_path):
    """A call waiting in the ledger (another process holds the room) that is cancelled leaves
    nothing held in this process: the next call is not kept waiting by it."""
    with OpenAIServer(latency=0.0) as server:
        [llm] = sharing_a_budget(server, tmp_path, 1, max_concurrency=4, budget_tokens=30_000)
        store, run_id = llm.store, llm.run_id
        other, _ = store.hold_budget(run_id, 0.0, 28_000, None, 30_000, ttl=60)  # another process's

        async def cancelled_then_another():
            waiting = asyncio.ensure_future(llm.chat(USER))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # no room beside the other process's hold
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            held = (llm._holds, llm._reserved_tokens)
            store.settle_budget(run_id, [other], 0.0, 100)  # the other process's call ends
            return held, await asyncio.wait_for(llm.chat(USER), 5)

        (holds, reserved), outcome = run(cancelled_then_another())
        assert (holds, reserved) == (0, 0) and outcome.ok


def test_a_refusal_in_one_process_stops_the_others(tmp_path):
    """The processes of one run share its refusal: once one of them could not pay a call, the
    others launch none either, and say what that call could have cost."""
    with OpenAIServer(latency=0.0) as server:
        layers = sharing_a_budget(server, tmp_path, 2, budget_tokens=10_000)
        big = [{"role": "user", "content": "b" * 60_000}]  # a worst case past the whole budget
        assert run(layers[0].chat(big)).status is Status.budget_exhausted
        before = len(server.requests)
        assert layers[1].budget_exhausted
        assert run(layers[1].chat(USER)).status is Status.budget_exhausted  # fits, yet not launched
        assert len(server.requests) == before
        assert layers[1].budget_refused() == layers[0].budget_refused() != ""


def test_the_run_status_sees_another_processs_refusal_at_once(tmp_path):
    """A process that asked the ledger less than a second before another one's refusal still
    ends with the budget's status: the run's status asks the store now."""
    with OpenAIServer(latency=0.0) as server:
        layers = sharing_a_budget(server, tmp_path, 2, budget_tokens=10_000)
        assert not layers[1].budget_exhausted  # asked the ledger just now
        big = [{"role": "user", "content": "b" * 60_000}]
        assert run(layers[0].chat(big)).status is Status.budget_exhausted
        assert layers[1].budget_stopped()


def test_a_call_stopped_by_a_refused_key_records_what_its_attempts_spent():
    """A first attempt that timed out (its prompt read) and a second the endpoint refused (401):
    the call's row holds the first attempt's tokens and dollars, as the budget counted them."""
    with OpenAIServer(timeout_hang=5) as server:
        llm = http_llm(server, request_timeout=0.3, budget_usd=1.0)
        server.schedule("timeout", "401")
        with pytest.raises(Exception):
            run(llm.chat(USER))
        [row] = llm.store.calls()
        assert row.attempts == 2 and row.outcome == "infra-error"
        assert row.prompt_tokens > 0 and row.prompt_tokens == llm.spent_tokens
        assert row.cost_usd == pytest.approx(llm.spent_usd) and row.cost_usd > 0


def test_token_budget(scripted_llm):
    llm, _ = scripted_llm("a" * 400, "b", budget_tokens=50)
    assert run(llm.chat(USER)).status is Status.budget_exhausted  # its worst case (an output cap) exceeds 50
    llm, _ = scripted_llm("a" * 400, "b", budget_tokens=8000)
    assert run(llm.chat(USER)).ok
    llm.settings.budget_tokens = llm.spent_tokens + 100
    assert run(llm.chat(USER)).status is Status.budget_exhausted


def test_cache_hit_makes_no_model_call_and_survives_a_new_run(tmp_path):
    store = Store.for_workspace(tmp_path)
    first = LLM(store=store, run_id=store.start_run(), seed=3)
    a = run(first.structured(USER, Policies, stage="extract"))
    provider = first.provider_for("default")
    assert isinstance(provider, SchemaModel) and provider.requests == 1
    run(first.aclose())  # a run ends by flushing its buffered rows

    second = LLM(store=Store.for_workspace(tmp_path), run_id=store.start_run(), seed=3)
    b = run(second.structured(USER, Policies, stage="extract"))
    assert b.cached and b.value == a.value and second.provider_for("default").requests == 0

    calls = second.store.calls(second.run_id)
    assert [(c.cached, c.cost_usd) for c in calls] == [(True, 0.0)]

    no_cache = LLM(store=store, seed=3, cache=False)
    c = run(no_cache.structured(USER, Policies))
    assert not c.cached and no_cache.provider_for("default").requests == 1

    other_seed = LLM(store=store, seed=4)
    assert not run(other_seed.structured(USER, Policies)).cached


def test_each_item_and_each_named_sample_is_a_draw_of_its_own(tmp_path):
    """The same question asked for two step items' inputs (two trials of a task), or twice for one
    item as named samples (two committee members), gets answers of its own; the same inputs asked
    again (a resumed run) get the cached answer."""
    from intellagent.context import StepLLM

    store = Store.for_workspace(tmp_path)
    llm = LLM(store=store, run_id=store.start_run(), seed=3)
    roles = {"default": "answers"}

    def ask(item, sample=None):
        return run(StepLLM(llm, "step", roles, draw=item).structured(USER, Policies, role="default", sample=sample))

    first, second, again = ask("trial-1"), ask("trial-2"), ask("trial-1")
    member_a, member_b = ask("trial-1", sample="member-0"), ask("trial-1", sample="member-1")
    assert not first.cached and not second.cached and again.cached and again.value == first.value
    assert not member_a.cached and not member_b.cached
    assert len({first.request_hash, second.request_hash, member_a.request_hash, member_b.request_hash}) == 4
    assert first.value != second.value  # mock/schema draws from the request: another draw, another answer
    assert llm.provider_for("default").requests == 4


def test_an_answer_is_durable_at_once_and_other_rows_on_flush(tmp_path, monkeypatch):
    monkeypatch.setattr(Store, "FLUSH_SECONDS", 3600.0)  # no timed flush, however slow the machine
    store = Store.for_workspace(tmp_path)
    llm = LLM(store=store, run_id=store.start_run())
    outcome = run(llm.structured(USER, Policies))
    other = Store.for_workspace(tmp_path)  # another process's view of the same file
    # what was paid for is committed before the caller sees it: a kill cannot make us pay again
    assert len(other.calls()) == 1 and other.cached(outcome.request_hash) is not None
    hit = run(llm.structured(USER, Policies))
    assert hit.cached and len(other.calls()) == 1  # a cache hit's row waits for the next flush
    store.flush()
    assert len(other.calls()) == 2


def test_identical_requests_in_flight_share_one_model_call():
    with OpenAIServer(latency=0.2) as server:
        llm = http_llm(server)

        async def same_five():
            return await asyncio.gather(*[llm.structured(USER, Verdict, stage="s") for _ in range(5)])

        outcomes = run(same_five())
        assert len(server.requests) == 1
        assert all(o.ok and o.value == outcomes[0].value for o in outcomes)
        assert sorted(o.cached for o in outcomes) == [False, True, True, True, True]
        assert [r.cached for r in llm.store.calls()].count(False) == 1


def test_scripted_models_are_never_cached(scripted_llm):
    llm, model = scripted_llm("one", "two")
    assert [run(llm.chat(USER)).value.content for _ in range(2)] == ["one", "two"]


def test_every_call_is_recorded_with_its_accounting(tmp_path, runner):
    store = Store.for_workspace(tmp_path)
    run_id = store.start_run(environment="airline")
    with OpenAIServer() as server:
        llm = LLM(LLMSettings(default=ModelSettings(model="gpt-4o-mini", base_url=server.base_url),
                              roles={"critic": ModelSettings(model="mock/schema")}),
                  store=store, run_id=run_id)
        run(llm.structured(USER, Policies, role="extractor", stage="extract"))
        run(llm.chat(USER, role="user", stage="simulate"))
        run(llm.structured(USER, Verdict, role="critic", stage="critique"))
        run(llm.aclose())
    rows = store.calls(run_id)
    assert [(r.stage, r.role, r.model, r.kind) for r in rows] == [
        ("extract", "extractor", "gpt-4o-mini", "structured"),
        ("simulate", "user", "gpt-4o-mini", "chat"),
        ("critique", "critic", "mock/schema", "structured")]
    for r in rows:
        assert len(r.request_hash) == 64 and r.prompt_tokens > 0 and r.completion_tokens > 0
        assert r.latency_ms > 0 and r.outcome == "ok"
    expected = (rows[0].prompt_tokens * 0.15 + rows[0].completion_tokens * 0.60) / 1e6
    assert rows[0].cost_usd == pytest.approx(expected) and rows[2].cost_usd == 0.0

    result = runner.invoke(cli, ["cost", "latest", "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"run {run_id}"
    assert any(l.startswith("extract") and "gpt-4o-mini" in l for l in lines)
    total = next(l for l in lines if l.startswith("total"))
    assert total.split()[1] == "3" and lines[-1].startswith("(what the run's results took")

    missing = runner.invoke(cli, ["cost", "nope", "--workspace", str(tmp_path)])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.stderr


def test_the_cache_key_holds_every_setting_that_shapes_the_answer():
    def key(**settings):
        llm = LLM(LLMSettings(default=ModelSettings(model="mock/schema", **settings)))
        return llm._request("default", USER).key()

    plain = key()
    assert key(options={"list_items": 2}) != plain
    assert key(base_url="http://127.0.0.1:9/v1") != plain
    assert key(temperature=0.3) != plain
    assert key(timeout=5) == plain and key(api_key_env="OTHER_KEY") == plain


def test_structured_output_with_aliased_fields_over_http_and_from_the_cache(openai_server, tmp_path):
    from pydantic import create_model

    model = create_model("ByPolicy", w0=(int, Field(alias="P1", ge=0, le=10)),
                         w1=(int, Field(alias="P2", ge=0, le=10)))
    store = Store.for_workspace(tmp_path)
    for _ in range(2):  # the second answer comes from the cache
        llm = http_llm(openai_server, store=store)
        out = run(llm.structured(USER, model))
        run(llm.aclose())
        assert out.ok, out.error
        assert 0 <= out.value.w0 <= 10 and 0 <= out.value.w1 <= 10
    assert out.cached


def test_identical_requests_share_a_failure_without_crashing_or_resending():
    from intellagent.llm.errors import ServerError

    class Down:
        cacheable = True
        calls = 0

        async def chat(self, request):
            Down.calls += 1
            await asyncio.sleep(0.05)
            raise ServerError("down")

    llm = LLM(LLMSettings(default=ModelSettings(model="down"), max_retries=0), providers={"down": Down()})

    async def many():
        return await asyncio.gather(*[llm.chat(USER) for _ in range(5)])

    outcomes = run(many())  # used to end in KeyError(<request hash>) for all but the first two
    assert [o.status.value for o in outcomes] == ["infra-error"] * 5
    assert Down.calls == 1  # the waiters did not send the failed request again


@pytest.mark.parametrize("fault", ["500", "429", "reset", "malformed"])
def test_a_transient_fault_after_an_invalid_answer_is_retried(fault, openai_server):
    openai_server.schedule("invalid", fault)
    llm = http_llm(openai_server)
    out = run(llm.structured(USER, Policies))
    run(llm.aclose())
    assert out.ok, out.error  # it used to be a permanent invalid-output, never retried


def test_output_that_keeps_failing_counts_its_real_attempts(openai_server):
    openai_server.schedule("invalid", "invalid", "invalid")
    llm = http_llm(openai_server, validation_retries=2)
    out = run(llm.structured(USER, Policies))
    run(llm.aclose())
    assert out.status.value == "invalid-output" and out.error.startswith("invalid-output")
    assert "after 3 attempts" in out.error and len(openai_server.requests) == 3


def test_a_refused_connection_is_not_reported_as_a_timeout():
    llm = LLM(LLMSettings(default=ModelSettings(model="m", base_url="http://127.0.0.1:9/v1"),
                          max_retries=1, backoff_base=0.01))
    out = run(llm.chat(USER))
    run(llm.aclose())
    assert out.status.value == "infra-error" and "connection refused" in out.error


def test_a_garbled_response_body_is_transient_even_inside_structured_output(openai_server):
    openai_server.schedule("malformed", "malformed", "malformed")
    llm = http_llm(openai_server, validation_retries=2, max_retries=3)
    out = run(llm.structured(USER, Policies))
    run(llm.aclose())
    # three garbled bodies in a row, then an answer: retried as transport faults (one attempt
    # each), never spent as validation attempts or reported as "invalid output"
    assert out.ok, out.error
    assert out.attempts == 4 and len(openai_server.requests) == 4


def test_garbled_bodies_to_the_end_are_a_malformed_response_not_invalid_output(openai_server):
    openai_server.schedule(*["malformed"] * 4)
    llm = http_llm(openai_server, validation_retries=2, max_retries=3)
    out = run(llm.structured(USER, Policies))
    run(llm.aclose())
    assert out.status.value == "infra-error" and out.error.startswith("malformed-response")
    assert "after 4 attempts" in out.error

@pytest.mark.parametrize("base", [ResponseModel, BaseModel])
def test_a_per_call_response_model_has_its_schema_built_once(base, openai_server, monkeypatch):
    """A model made for one call (a field per policy id) is asked for its JSON Schema by our
    cache key, instructor's tool definition and instructor's subclass of it: built once."""
    built = []
    generate = GenerateJsonSchema.generate
    monkeypatch.setattr(GenerateJsonSchema, "generate",
                        lambda self, *a, **k: built.append(1) or generate(self, *a, **k))
    model = create_model("Judgement", __base__=base, **{
        f"p{i}": (Policies, Field(alias=f"P-{i}")) for i in range(3)})
    llm = http_llm(openai_server)
    out = run(llm.structured(USER, model))
    run(llm.aclose())
    assert out.ok, out.error
    sent = openai_server.requests[-1]["tools"][0]["function"]["parameters"]
    assert sorted(sent["properties"]) == ["P-0", "P-1", "P-2"] and "Policies" in json.dumps(sent)
    assert len(built) == 1 if base is ResponseModel else len(built) >= 2  # BaseModel: rebuilt per asker


def test_a_response_model_schema_is_shared_only_with_a_subclass_adding_nothing():
    model = create_model("Judgement", __base__=ResponseModel, a=(str, Field(alias="P-1")))
    first = model.model_json_schema()
    first["title"] = "edited by a caller"
    assert model.model_json_schema()["title"] == "Judgement"  # each caller gets its own copy

    class More(model):
        b: int = 0

    assert sorted(More.model_json_schema()["properties"]) == ["P-1", "b"]
    assert model.model_json_schema(by_alias=False)["properties"].keys() == {"a"}


def test_the_structured_mode_probe_is_not_billed_to_the_first_call(openai_server):
    """With ``structured: auto`` the first call probes the endpoint first; that answer's tokens
    are the probe's, not the call's."""
    model = ModelSettings(model="gpt-4o-mini", base_url=openai_server.base_url)
    llm = LLM(LLMSettings(default=model), seed=7)
    outcome = run(llm.structured(USER, Verdict))
    assert outcome.ok and len(openai_server.requests) == 2  # the probe, then the call
    probe, call = openai_server.requests
    assert "ok" in json.dumps(probe["messages"])
    assert outcome.usage.prompt_tokens == openai_server.prompt_tokens(call)


def test_a_request_keeps_the_conversation_as_it_was_asked_and_the_key_of_a_validated_one():
    llm = LLM(LLMSettings(default=ModelSettings(model="mock/schema", temperature=0.3)))
    messages = [{"role": "user", "content": "hello"}]
    request = llm._request("default", messages, "trial-1", tools=[{"type": "function"}])
    messages.append({"role": "assistant", "content": "later"})  # the step goes on with its list
    assert request.messages == [{"role": "user", "content": "hello"}]
    validated = ChatRequest(**request.model_dump())
    assert request.canonical() == validated.canonical() and request.key() == validated.key()
    again = llm._request("default", [{"role": "user", "content": "hello"}], "trial-1", tools=[{"type": "function"}])
    assert again.key() == request.key()  # the role's endpoint settings, kept, are the same
