"""``provider: litellm``: any model LiteLLM serves through the same LLM layer (instructor's
structured output, the cache, accounting, the budget, retries), offline: against the local
OpenAI-compatible test server, and against a fake of Anthropic's Messages API routed by base
URL."""

from __future__ import annotations

import asyncio
import http.server
import json
import random
import site
import sys
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from intellagent.environment import load_environment
from intellagent.errors import ConfigError, IntellagentError
from intellagent.llm import LLM
from intellagent.llm.errors import ModelRefused, RealModelForbidden
from intellagent.llm.fabricate import fabricate
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.registry import load_registry
from intellagent.store import Store
from intellagent.testing.harness import run_pipeline
from intellagent.testing.openai_server import OpenAIServer
from tests import progress_steps

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Judge the answer."}]
TOOL = {"type": "function", "function": {"name": "lookup", "description": "Find an order.",
                                         "parameters": {"type": "object",
                                                        "properties": {"order_id": {"type": "string"}},
                                                        "required": ["order_id"]}}}
PRICE = {"input": 1000.0, "output": 2000.0}  # dollars a million tokens: every call costs something


class Verdict(BaseModel):
    passed: bool
    reason: str


def run(coro):
    return asyncio.run(coro)


def litellm_llm(model: str, base_url: str, store: Store | None = None, **settings) -> LLM:
    options = {k: settings.pop(k) for k in ("api_key_env", "structured") if k in settings}
    setting = ModelSettings(model=model, provider="litellm", base_url=base_url, **options)
    settings.setdefault("backoff_base", 0.01)
    return LLM(LLMSettings(default=setting, prices={model: PRICE}, **settings), seed=7, store=store)


# -- an OpenAI-compatible endpoint ----------------------------------------------------------------

def test_chat_and_tool_calls_through_litellm():
    with OpenAIServer() as server:
        llm = litellm_llm("openai/test-model", server.base_url)
        reply = run(llm.chat(USER + [{"role": "user", "content": "Find order 7."}], tools=[TOOL],
                             tool_choice={"type": "function", "function": {"name": "lookup"}}))
        assert reply.ok, reply.error
        [call] = reply.value.tool_calls
        assert call.name == "lookup" and isinstance(json.loads(call.arguments)["order_id"], str)
        text = run(llm.chat(USER))
        assert text.ok and text.value.content and not text.value.tool_calls
        sent = server.requests[0]
        assert sent["model"] == "test-model" and sent["tools"][0]["function"]["name"] == "lookup"
        assert len(server.requests) == 2


def test_structured_output_the_cache_and_accounting_are_the_layers(tmp_path):
    with OpenAIServer(prompt_cache=True) as server:
        store = Store.for_workspace(tmp_path)
        llm = litellm_llm("openai/test-model", server.base_url, store=store, structured="tools")
        first = run(llm.structured(USER, Verdict, role="default", stage="judge"))
        assert first.ok, first.error
        assert isinstance(first.value, Verdict) and first.usage.prompt_tokens > 0
        again = run(llm.structured(USER, Verdict, role="default", stage="judge"))
        assert again.cached and again.value == first.value and len(server.requests) == 1
        longer = run(llm.structured(USER + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "More?"}],
                                    Verdict, role="default", stage="judge"))  # (same tools: a prefix)
        assert longer.usage.cached_tokens > 0  # the server's prompt cache, read through LiteLLM
        store.flush()
        calls = store.calls()
        [made, second] = [c for c in calls if not c.cached]
        assert len(calls) == 3 and made.provider == "litellm" and made.kind == "structured"
        assert made.prompt_tokens == first.usage.prompt_tokens and made.completion_tokens == first.usage.completion_tokens
        # priced from the run's own table, not LiteLLM's map
        assert made.cost_usd == pytest.approx((made.prompt_tokens * PRICE["input"]
                                               + made.completion_tokens * PRICE["output"]) / 1e6)
        assert llm.spent_usd == pytest.approx(made.cost_usd + second.cost_usd)


def test_faults_are_retried_by_the_layer_and_a_refused_key_stops_the_run():
    with OpenAIServer(retry_after=0.05) as server:
        llm = litellm_llm("openai/test-model", server.base_url, structured="tools", max_retries=3)
        server.schedule("500", "429", "reset")
        outcome = run(llm.structured(USER, Verdict))
        assert outcome.ok and outcome.attempts == 4 and len(server.requests) == 4
        server.schedule("invalid")  # an answer that does not fit: re-asked with the error
        refit = run(llm.structured(USER + [{"role": "user", "content": "Again."}], Verdict))
        assert refit.ok and refit.attempts == 1
        reasked = server.requests[-1]["messages"]
        assert len(reasked) > 3 and "validation" in json.dumps(reasked[-1]).lower()
        server.schedule(*["503"] * 4)
        failed = run(llm.structured(USER + [{"role": "user", "content": "Once more."}], Verdict))
        assert failed.status.value == "infra-error" and failed.attempts == 4 and "503" in failed.error
        server.schedule("401")
        with pytest.raises(ModelRefused, match="refused the key"):
            run(llm.chat([{"role": "user", "content": "hi"}]))


# -- Anthropic's Messages API, routed by base URL ------------------------------------------------

class FakeAnthropic(http.server.ThreadingHTTPServer):
    """``POST /v1/messages`` as Anthropic answers it: text, or ``tool_use`` (forced by a named
    tool choice, which is how structured output arrives), with usage including cache reads."""

    CACHE_READ = 16

    def __init__(self) -> None:
        fake = self
        self.requests: list[tuple[str, dict, dict]] = []
        self.faults: list[int] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, dict(self.headers), body))
                if fake.faults:
                    status = fake.faults.pop(0)
                    kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
                    return self.send(status, {"type": "error", "error": {"type": kind, "message": "no"}})
                self.send(200, fake.answer(body))

            def send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, body: dict) -> dict:
        rng = random.Random(json.dumps(body, sort_keys=True))
        tools = {t["name"]: t for t in body.get("tools") or []}
        choice = body.get("tool_choice") or {}
        last = body["messages"][-1]["content"]
        replying_to_tool = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        name = choice.get("name") if choice.get("type") == "tool" else (
            next(iter(tools)) if tools and not replying_to_tool else None)
        if name is not None:
            content = [{"type": "tool_use", "id": f"toolu_{rng.getrandbits(32):08x}", "name": name,
                        "input": fabricate(tools[name]["input_schema"], rng)}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "A short answer."}]
            stop = "end_turn"
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": len(json.dumps(body["messages"])) // 4, "output_tokens": len(json.dumps(content)) // 4,
                          "cache_read_input_tokens": self.CACHE_READ, "cache_creation_input_tokens": 0}}

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def test_anthropic_messages_api_through_litellm(monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-test-123456")
    with FakeAnthropic() as fake:
        llm = litellm_llm("anthropic/claude-test", fake.url, api_key_env="FAKE_ANTHROPIC_KEY")
        # structured output: instructor's forced tool call, probed once (a base URL), as tool_use
        verdict = run(llm.structured(USER, Verdict))
        assert verdict.ok, verdict.error
        assert isinstance(verdict.value, Verdict) and llm.structured_modes() == {"default": "tools"}
        path, headers, body = fake.requests[-1]
        assert path == "/v1/messages" and headers["x-api-key"] == "sk-ant-test-123456"
        assert "anthropic-version" in headers and "seed" not in body  # a parameter it does not take, dropped
        assert body["tool_choice"] == {"type": "tool", "name": "Verdict"}
        assert body["system"][0]["text"] == "Be brief." and all(m["role"] != "system" for m in body["messages"])
        assert verdict.usage.cached_tokens == FakeAnthropic.CACHE_READ
        assert verdict.usage.prompt_tokens >= len(json.dumps(body["messages"])) // 4 + FakeAnthropic.CACHE_READ
        # chat with tools: tool_use comes back as a tool call; its result goes back as tool_result
        asked = USER + [{"role": "user", "content": "Find order 7."}]
        reply = run(llm.chat(asked, tools=[TOOL]))
        [call] = reply.value.tool_calls
        assert call.name == "lookup" and call.id.startswith("toolu_") and reply.value.finish_reason == "tool_calls"
        answered = asked + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "{\"status\": \"shipped\"}"}]
        final = run(llm.chat(answered, tools=[TOOL]))
        assert final.ok and final.value.content == "A short answer."
        assert fake.requests[-1][2]["messages"][-1]["content"][0]["type"] == "tool_result"
        # Anthropic's own faults, as the layer handles any provider's
        fake.faults += [429, 500]
        retried = run(llm.chat(USER + [{"role": "user", "content": "Retry me."}]))
        assert retried.ok and retried.attempts == 3
        fake.faults.append(401)
        with pytest.raises(ModelRefused):
            run(llm.chat([{"role": "user", "content": "hi"}]))
        assert "sk-ant-test-123456" not in json.dumps([r[2] for r in fake.requests])


# -- a run -----------------------------------------------------------------------------------

def test_a_pipeline_runs_on_a_litellm_model_and_a_second_run_makes_no_call(shop, tmp_path):
    registry = load_registry(plugins=[progress_steps.plugin()])
    with OpenAIServer() as server:
        spec = progress_steps.pipeline(items=2)
        spec["llm"] = {"default": {"model": "openai/test-model", "provider": "litellm", "base_url": server.base_url,
                                   "structured": "json_schema"},
                       "prices": {"openai/test-model": PRICE}}
        first = run_pipeline(spec, load_environment(shop), registry=registry, workspace=tmp_path)
        made = len(server.requests)
        assert made == 2 + 6 and first.report.info.status == "done"
        costs = {r["stage"]: r["cost_usd"] for r in first.data.store.cost_summary(first.run_id)}
        assert costs["cheap"] > 0 and costs["dear"] > costs["cheap"]
        again = run_pipeline(spec, load_environment(shop), registry=registry, workspace=tmp_path)
        assert len(server.requests) == made and again.report.info.status == "done"


# -- configuration -------------------------------------------------------------------------------

def test_what_cannot_work_is_refused_before_any_call(monkeypatch):
    from intellagent_plugins.providers.litellm_provider import LiteLLMProvider

    with pytest.raises(ConfigError, match="does not know which provider serves 'claude-no-prefix'"):
        LiteLLMProvider(ModelSettings(model="claude-no-prefix", provider="litellm", base_url="http://127.0.0.1:9"))
    with pytest.raises(ConfigError, match="option 'aws_secret_access_key' would put a secret in YAML"):
        LiteLLMProvider(ModelSettings(model="bedrock/x", provider="litellm", base_url="http://127.0.0.1:9",
                                      options={"aws_secret_access_key": "abc"}))
    with pytest.raises(RealModelForbidden, match="not local"):  # tests never leave the machine
        LiteLLMProvider(ModelSettings(model="anthropic/claude-sonnet-4-5", provider="litellm"))
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(RealModelForbidden, match="set NO_SUCH_KEY"):
        LiteLLMProvider(ModelSettings(model="openai/m", provider="litellm", base_url="http://127.0.0.1:9",
                                      api_key_env="NO_SUCH_KEY"))
    assert issubclass(RealModelForbidden, IntellagentError) and issubclass(ConfigError, IntellagentError)


def test_the_installed_litellm_runs_nothing_at_interpreter_start():
    """Versions 1.82.7 and 1.82.8 were malware run from a .pth file at every Python start."""
    import litellm  # noqa: F401

    folders = {Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]} | {
        Path(p) for p in sys.path if p.endswith("site-packages")}
    assert not [p for folder in folders if folder.is_dir() for p in folder.glob("*.pth")
                if "litellm" in p.name.lower() or "litellm" in p.read_text(errors="replace").lower()]
