"""Local models end to end (issue 37, points 1-4; issue 36's retries): the timeout a user sets
reaches the HTTP request and names itself, a call's deadline bounds its retries, a structured
call carries an output cap, a retry after a timeout and a re-run after a failure are not the
same request, every attempt's tokens are counted, and output that does not fit is its own status.
All against the local OpenAI-compatible test server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from pydantic import BaseModel, Field

from intellagent.cli import cli
from intellagent.llm import LLM, Status
from intellagent.llm.sizing import CEILING, FLOOR, output_cap
from intellagent.pipeline import LLMSettings, ModelSettings, Price
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer

USER = [{"role": "user", "content": "Judge it."}]


class Verdict(BaseModel):
    passed: bool
    reason: str = Field(max_length=200)


def run(coro):
    return asyncio.run(coro)


def settings(server: OpenAIServer, *, role_timeout: float | None = None, mode: str = "tools",
             **limits) -> LLMSettings:
    model = ModelSettings(model="m", base_url=server.base_url, structured=mode)
    roles = {"judge": model.model_copy(update={"timeout": role_timeout})} if role_timeout else {}
    limits.setdefault("backoff_base", 0.01)
    return LLMSettings(default=model, roles=roles, **limits)


async def ask(llm: LLM, *, role: str = "default", kind: str = "structured"):
    try:
        if kind == "chat":
            return await llm.chat(USER, role=role)
        return await llm.structured(USER, Verdict, role=role)
    finally:
        await llm.aclose()


# -- 1. one timeout, end to end ----------------------------------------------------------------

def test_llm_timeout_cuts_the_http_request_and_the_error_names_the_limit():
    """The server answers after 2.5 s. A structured call may re-ask twice, so the layer's own
    guard allows it 3 x 0.5 s: only the HTTP request's own limit (llm.timeout, 0.5 s) ends it
    at 0.5 s (the provider used to keep a fixed 120 s of its own)."""
    with OpenAIServer(latency=2.5) as server:
        llm = LLM(settings(server, timeout=0.5, max_retries=0))
        llm.provider_for("default")  # made (and its libraries imported) before the clock starts
        started = time.perf_counter()
        out = run(ask(llm))
        took = time.perf_counter() - started
    assert out.status is Status.infra_error and took < 1.3, (out.error, took)
    assert out.error == "timeout: no answer within 0.5 s (llm.timeout)"


def test_a_roles_own_timeout_wins_over_llm_timeout():
    with OpenAIServer(latency=0.8) as server:
        short = run(ask(LLM(settings(server, timeout=0.3, max_retries=0)), kind="chat"))
        own = run(ask(LLM(settings(server, role_timeout=3, timeout=0.3, max_retries=0)), role="judge",
                      kind="chat"))
        tight = run(ask(LLM(settings(server, role_timeout=0.3, timeout=30, max_retries=0)), role="judge",
                        kind="chat"))
    assert not short.ok and "within 0.3 s (llm.timeout)" in short.error
    assert own.ok, own.error  # the role's 3 s beats llm.timeout's 0.3 s
    assert not tight.ok and "within 0.3 s (llm.roles.judge.timeout)" in tight.error


def test_a_limit_above_the_old_fixed_120_s_is_what_the_http_layer_uses():
    with OpenAIServer() as server:
        llm = LLM(settings(server, timeout=300, role_timeout=450))

        async def sessions():
            try:
                await llm.chat(USER)
                await llm.chat(USER, role="judge")
                return [llm.provider_for(r)._session().timeout.total for r in ("default", "judge")]
            finally:
                await llm.aclose()
        assert run(sessions()) == [300, 450]


# -- issue 36: retries and the call's deadline ---------------------------------------------------

def test_identical_500_bodies_get_every_configured_retry():
    """A passing fault answers every request the same way too: six attempts, as configured."""
    with OpenAIServer(faults=["500"] * 5) as server:
        out = run(ask(LLM(settings(server, max_retries=5))))
    assert out.ok, out.error
    assert len(server.requests) == 6 and out.attempts == 6


def test_a_model_that_never_answers_is_stopped_at_the_calls_deadline():
    """With a 0.5 s timeout and plenty of retries, a server that never answers would hold the
    call for all of them; the deadline (llm.deadline) ends it, in flight or before a back-off."""
    with OpenAIServer(timeout_hang=30) as server:
        server.schedule(*["timeout"] * 20)
        llm = LLM(settings(server, timeout=0.5, max_retries=20, deadline=1.6, backoff_base=0.05))
        llm.provider_for("default")  # made (and its libraries imported) before the clock starts
        started = time.perf_counter()
        out = run(ask(llm, kind="chat"))
        took = time.perf_counter() - started
    assert out.status is Status.infra_error and took < 3.0, took  # 20 retries would take > 10 s
    assert out.error.count("deadline of 1.6 s (llm.deadline)") == 1  # said once
    assert 2 <= out.attempts <= 4


def test_the_deadline_defaults_to_300_s_and_is_operational():
    from intellagent.runner import OPERATIONAL

    assert LLMSettings().deadline == 300 and "deadline" in OPERATIONAL


# -- 2. an output cap; no identical re-send --------------------------------------------------

def test_structured_calls_carry_an_output_cap_sized_from_the_response_model():
    class Long(BaseModel):
        items: list[str] = Field(max_length=40)

    with OpenAIServer() as server:
        assert run(ask(LLM(settings(server)))).ok
        sent = server.requests[-1]["max_tokens"]
        assert sent == output_cap(Verdict.model_json_schema()) and FLOOR <= sent < CEILING
        assert output_cap(Long.model_json_schema()) > sent  # a larger model, a larger cap
        role = settings(server)
        role.default.max_tokens = 77  # the role's own cap wins
        assert run(ask(LLM(role))).ok and server.requests[-1]["max_tokens"] == 77


def test_a_runaway_answer_is_cut_at_the_cap_and_is_invalid_output():
    """A model that never closes its JSON is cut by the server at max_tokens (finish reason
    length): the call ends invalid-output at once, saying so, instead of waiting for a timeout."""
    runaway = {"role": "assistant", "content": '{"passed": true, "reason": "' + "again " * 20000}
    with OpenAIServer(responder=lambda request: runaway) as server:
        out = run(ask(LLM(settings(server, mode="json_schema"))))
    assert out.status is Status.invalid_output
    assert f"cut at the output cap of {output_cap(Verdict.model_json_schema())} tokens" in out.error
    assert len(server.requests) == 1


def test_a_retry_after_a_timeout_is_another_request_cached_under_the_calls_own_key(tmp_path):
    with OpenAIServer(timeout_hang=3) as server:
        store = Store.for_workspace(tmp_path)
        server.schedule("timeout")
        out = run(ask(LLM(settings(server, timeout=0.5, max_retries=2), store=store)))
        assert out.ok, out.error
        first, retry = server.requests
        assert first["seed"] != retry["seed"]  # a deterministic server would time out again
        assert {k: v for k, v in first.items() if k != "seed"} == {k: v for k, v in retry.items() if k != "seed"}
        again = run(ask(LLM(settings(server, timeout=0.5, max_retries=2), store=store)))
    assert again.ok and again.cached and again.request_hash == out.request_hash
    assert len(server.requests) == 2


# -- 3. every attempt counted -------------------------------------------------------------------

def test_every_attempts_tokens_are_recorded_priced_and_charged(tmp_path, runner):
    store = Store.for_workspace(tmp_path)
    run_id = store.start_run()
    price = {"m": Price(input=1000, output=2000)}
    with OpenAIServer(timeout_hang=3) as server:
        server.schedule("invalid", "invalid")  # both answers were generated: paid, though unused
        llm = LLM(settings(server, validation_retries=1, prices=price), store=store, run_id=run_id)
        failed = run(ask(llm))
        sent = [server.prompt_tokens(r) for r in server.requests]
        server.schedule("timeout")  # the server read this prompt before it was cut: estimated
        llm2 = LLM(settings(server, timeout=0.5, prices=price), store=store, run_id=run_id)
        late = run(ask(llm2, kind="chat"))
    assert failed.status is Status.invalid_output and late.ok
    rows = store.calls(run_id)
    assert rows[0].outcome == "invalid-output" and rows[0].prompt_tokens == sum(sent)
    assert rows[0].completion_tokens > 0 and rows[0].cost_usd > 0
    assert rows[0].cost_usd == pytest.approx((rows[0].prompt_tokens * 1000 + rows[0].completion_tokens * 2000) / 1e6)
    answered = max(1, len(json.dumps(USER)) // 4)
    assert rows[1].outcome == "ok" and rows[1].attempts == 2 and rows[1].prompt_tokens > 2 * answered
    # the budget was charged what the store says, and `intellagent cost` says the same
    assert llm.spent_usd == pytest.approx(rows[0].cost_usd) and llm2.spent_usd == pytest.approx(rows[1].cost_usd)
    assert llm.spent_tokens == rows[0].prompt_tokens + rows[0].completion_tokens
    out = runner.invoke(cli, ["cost", run_id, "--workspace", str(tmp_path)]).output
    total = next(line for line in out.splitlines() if line.startswith("total")).split()
    assert float(total[-1]) == pytest.approx(rows[0].cost_usd + rows[1].cost_usd, abs=1e-4)
    assert int(total[3]) == 1  # failed calls


def test_a_failed_call_spends_the_token_budget():
    with OpenAIServer() as server:
        server.schedule("invalid", "invalid", "invalid")
        llm = LLM(settings(server))
        first = run(ask(llm))
        assert first.status is Status.invalid_output and llm.spent_tokens > 10
        assert llm.spent_tokens == first.usage.total and len(server.requests) == 3
        llm.settings.budget_tokens = llm.spent_tokens + 10  # the failed attempts spent the rest
        assert run(ask(llm)).status is Status.budget_exhausted  # nothing more is sent
        assert len(server.requests) == 3


# -- 4. a model's bad output is its own status; a re-run asks with another seed ------------------

def test_a_rerun_asks_a_request_that_failed_with_another_seed_and_caches_it_under_its_key(tmp_path):
    with OpenAIServer() as server:
        store = Store.for_workspace(tmp_path)
        server.schedule("invalid", "invalid", "invalid")
        first = run(ask(LLM(settings(server), store=store)))
        assert first.status is Status.invalid_output
        seeds = {r["seed"] for r in server.requests}
        second = run(ask(LLM(settings(server), store=store)))  # "run the same command again"
        assert second.ok and server.requests[-1]["seed"] not in seeds
        third = run(ask(LLM(settings(server), store=store)))
    assert third.cached and third.request_hash == first.request_hash == second.request_hash
    assert len(server.requests) == 4
