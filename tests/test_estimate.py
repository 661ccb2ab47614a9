"""`intellagent run --estimate`: what a run will cost, before it starts, calling no model and no
agent; from the pipeline's shape and the environment, the items the store already holds, and the
figures of an earlier run in the workspace."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import re
import sqlite3
import time
import types
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.estimate import estimate_plan
from intellagent.model import StrictModel
from intellagent.plan import load_plan, model_overrides
from intellagent.registry import load_registry
from intellagent.report import Reporter
from intellagent.steps import Generator, Sampler
from intellagent_plugins.intellagent.extractor import edge_calls, rules_in
from tests import progress_steps
from tests.conftest import TAU_BENCH

REPO = Path(__file__).resolve().parent.parent
TOTAL = re.compile(r"total: (\d+) calls, (\d+) prompt \+ (\d+) completion tokens, (.*?); wall")
ROW = re.compile(r"^\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.*)$")
DURATION = r"([\d.]+ (?:s|min|h))"
WALL = re.compile(rf"; wall {DURATION} to {DURATION}")
OWN = re.compile(rf"of the wall, {DURATION} to {DURATION} is the run's own time")


def seconds(duration: str) -> float:
    """A duration as the estimate prints it ('2.4 s', '12 min', '1.5 h'), in seconds."""
    value, unit = duration.split()
    return float(value) * {"s": 1, "min": 60, "h": 3600}[unit]


def estimate(runner, ws: Path, *extra: str, env: str = "airline", events: int = 6) -> dict:
    result = runner.invoke(cli, ["run", env, "--events", str(events), "--workspace", str(ws),
                                 "--estimate", *extra])
    assert result.exit_code == 0, result.output
    steps = {m[1]: {"items": int(m[2]), "reused": int(m[3]), "calls": int(m[4]), "prompt": int(m[5]),
                    "completion": int(m[6]), "dollars": m[7], "from": m[8]}
             for line in result.output.splitlines() if (m := ROW.match(line))}
    calls, prompt, completion, dollars = TOTAL.search(result.output).groups()
    return {"steps": steps, "calls": int(calls), "tokens": int(prompt) + int(completion),
            "dollars": dollars, "output": result.output}


def run(runner, ws: Path, *extra: str, events: int = 6) -> tuple[int, int]:
    """Run for real (mock/schema); the calls it made and their tokens."""
    result = runner.invoke(cli, ["run", "airline", "--events", str(events), "--workspace", str(ws), *extra])
    assert result.exit_code in (0, 1), result.output
    with sqlite3.connect(ws / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        return conn.execute("SELECT count(*), sum(prompt_tokens + completion_tokens) FROM llm_calls "
                            "WHERE run_id = ? AND cached = 0", (run_id,)).fetchone()


def spent_by_step(ws: Path) -> dict[str, tuple[int, int]]:
    """The latest run's calls made (not cached) and their tokens, by step."""
    with sqlite3.connect(ws / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        return {stage: (n, t) for stage, n, t in conn.execute(
            "SELECT stage, count(*), sum(prompt_tokens + completion_tokens) FROM llm_calls "
            "WHERE run_id = ? AND cached = 0 GROUP BY stage", (run_id,))}


def test_the_estimate_calls_no_model_and_creates_no_workspace(runner, tmp_path, openai_server):
    ws = tmp_path / "ws"
    found = estimate(runner, ws, "--set", f"llm.default={{model: gpt-4o-mini, base_url: '{openai_server.base_url}'}}")
    assert openai_server.requests == []
    assert not ws.exists()
    assert found["calls"] > 0 and found["tokens"] > 0
    assert float(found["dollars"].lstrip("$")) > 0  # gpt-4o-mini has a price
    assert "a guess from the pipeline and the environment" in found["output"]


def test_the_cold_estimate_follows_the_pipelines_shape(runner, tmp_path):
    ten = estimate(runner, tmp_path / "a", events=10)["steps"]
    twenty = estimate(runner, tmp_path / "b", events=20)["steps"]
    assert ten["graph"] == twenty["graph"]  # made once, whatever the number of events
    for step in ("events", "dialogs", "verdicts"):
        assert twenty[step]["items"] == 2 * ten[step]["items"] == 20
        assert twenty[step]["calls"] == pytest.approx(2 * ten[step]["calls"], abs=1)
    # the policy graph's edge calls: the sum over k < P of ceil(k / block_size), or P(P-1)/2 pairwise
    policies, flows = rules_in(load_environment(REPO / "environments" / "airline").prompt)
    for options, edges in ((["--set", "steps.graph.with.block_size=4"], edge_calls(policies, 4)),
                           ([], edge_calls(policies, 40)),
                           (["--set", "steps.graph.with.edges=pairwise"], policies * (policies - 1) // 2)):
        graph = estimate(runner, tmp_path / "c", *options)["steps"]["graph"]
        assert graph["calls"] == 1 + flows + edges
    assert edge_calls(41, 40) == 40 and edge_calls(81, 40) == sum(math.ceil(k / 40) for k in range(1, 81))
    # shorter dialogs cost less
    short = estimate(runner, tmp_path / "d", "--set", "steps.dialogs.with.max_turns=1")["steps"]["dialogs"]
    assert short["calls"] < estimate(runner, tmp_path / "e")["steps"]["dialogs"]["calls"]


def test_after_a_run_the_estimate_counts_what_is_stored_and_measures_the_rest(runner, tmp_path):
    ws = tmp_path / "ws"
    run(runner, ws)
    again = estimate(runner, ws)
    assert again["calls"] == 0
    assert {s: v["reused"] for s, v in again["steps"].items()} == \
        {"graph": 1, "specs": 1, "events": 6, "dialogs": 6, "verdicts": 6}
    assert all(v["from"].startswith("run ") for s, v in again["steps"].items())

    # a changed agent: its dialogs and their verdicts again, the graph and the events reused
    changed = ["--set", "llm.roles.agent={model: mock/schema, temperature: 0.3}"]
    found = estimate(runner, ws, *changed)
    assert {s: (v["items"], v["reused"]) for s, v in found["steps"].items()} == \
        {"graph": (0, 1), "specs": (0, 1), "events": (0, 6), "dialogs": (6, 0), "verdicts": (6, 0)}
    # each at what the earlier run spent on as many items of that step, its roles' models being
    # the same endpoints (a temperature is not one): exactly, whatever the draw
    spent = spent_by_step(ws)
    for step in ("dialogs", "verdicts"):
        assert found["steps"][step]["calls"] == pytest.approx(spent[step][0], abs=1)
        assert found["steps"][step]["prompt"] + found["steps"][step]["completion"] == \
            pytest.approx(spent[step][1], rel=0.01)
    calls, tokens = run(runner, ws, *changed)
    # against the changed agent's own run: as near as its dialogs are to the first's (this
    # draw's are; the accuracy over sizes and seeds is bench/estimate_bench.py's figure)
    assert found["calls"] == pytest.approx(calls, rel=0.25)
    assert found["tokens"] == pytest.approx(tokens, rel=0.25)

    # more events: the first six are kept, the others made, at the measured cost per item
    found = estimate(runner, ws, events=18)
    assert (found["steps"]["events"]["items"], found["steps"]["events"]["reused"]) == (12, 6)
    calls, tokens = run(runner, ws, events=18)
    assert found["calls"] == pytest.approx(calls, rel=0.25)
    assert found["tokens"] == pytest.approx(tokens, rel=0.25)


def good_agent(messages, tools):
    return "Of course: your booking is confirmed."


def test_an_earlier_run_measures_only_what_it_shares_with_this_run(runner, tmp_path):
    """Another agent's dialogs measure nothing of this agent's (a Python agent makes no call of
    ours: the model agent's calls must not vanish from the estimate); a mutant's run is not the
    measurement."""
    cold = estimate(runner, tmp_path / "cold")["steps"]
    ws = tmp_path / "ws"
    run(runner, ws, "--agent", "python", "--set", "agent.with.callable=tests.test_estimate:good_agent")
    found = estimate(runner, ws)["steps"]
    assert not found["dialogs"]["from"].startswith("run ")
    assert found["dialogs"]["calls"] == cold["dialogs"]["calls"]
    assert found["events"]["from"].startswith("run ")  # the events do not depend on the agent

    plain = tmp_path / "plain"
    result = runner.invoke(cli, ["mutate", "airline", "--events", "6", "--workspace", str(plain),
                                 "--mutants", "refuse-all"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(plain / "intellagent.db") as conn:
        runs = [(run_id, json.loads(config).get("mutant")) for run_id, config in
                conn.execute("SELECT id, config FROM runs ORDER BY created_at")]
    assert [mutant for _, mutant in runs] == [None, "intellagent/refuse-all"]  # the mutant's is the latest
    found = estimate(runner, plain, "--set", "steps.dialogs.with.max_turns=3")["steps"]
    assert found["dialogs"]["from"] == f"run {runs[0][0]}"


def test_unpriced_models_and_a_budget_too_small_are_said(runner, tmp_path):
    unpriced = estimate(runner, tmp_path / "a", "--model", "my-local-model",
                        "--set", "llm.default.base_url=http://127.0.0.1:9/v1")
    assert unpriced["dollars"] == "unknown (no price for my-local-model)"
    small = estimate(runner, tmp_path / "b", "--model", "gpt-4o-mini", "--budget", "0.0001",
                     "--set", "llm.default.base_url=http://127.0.0.1:9/v1")
    assert "the budget ($0.0001) would stop it at about" in small["output"]


def test_an_agent_behind_http_is_not_contacted(runner, tmp_path):
    found = estimate(runner, tmp_path / "ws", "--agent", "http", "--set", "agent.with.url=http://127.0.0.1:9/turn")
    # its model is not ours: the dialogs' calls are the simulated user's and the reviewer's only
    assert found["steps"]["dialogs"]["calls"] < estimate(runner, tmp_path / "b")["steps"]["dialogs"]["calls"]


def test_the_dollars_of_calls_over_a_tiers_start_are_at_that_tiers_rates():
    """Gemini 2.5 Pro costs twice its base rate on a request whose prompt is over 200k tokens:
    the estimate priced every call at the base rates."""
    from intellagent.estimate import endpoint
    from intellagent.llm.prices import PriceTable

    registry = load_registry()
    env = load_environment(REPO / "environments" / "airline")
    plan = load_plan(None, registry, overrides=model_overrides("gemini-2.5-pro"))
    model = endpoint(plan.spec.llm.for_role("critic"))

    def judged_with(prompt: int) -> float:  # an earlier run whose judge read ``prompt`` tokens a call
        load = {"calls": 1.0, "prompt_tokens": float(prompt), "completion_tokens": 100.0, "model": model,
                "latency": 1.0}
        earlier = {"run_id": "r", "same_agent": True, "steps": {"verdicts": {
            "roles": {"critic": load}, "models": {"critic": model}, "sequential": 1.0}}}
        step = next(s for s in estimate_plan(plan, env, earlier, steps=["verdicts"]).steps)
        return step.dollars / step.items

    price = PriceTable().price("gemini-2.5-pro")  # the library's (2.5 and 15 over 200k, 1.25 and 10 under)
    (start, dear_in), = price.tiers[0]
    (_, dear_out), = price.tiers[1]
    assert dear_in > price.input and dear_out > price.output
    assert judged_with(start // 2) == pytest.approx((start // 2 * price.input + 100 * price.output) / 1e6)
    over = start + 50_000
    assert judged_with(over) == pytest.approx((over * dear_in + 100 * dear_out) / 1e6)


def test_a_providers_limit_per_minute_bounds_the_wall_time():
    registry = load_registry()
    env = load_environment(REPO / "environments" / "airline")
    plan = load_plan(None, registry, overrides=model_overrides("gpt-4o-mini")
                     + [("llm.tokens_per_minute", 10_000, "test")])
    found = estimate_plan(plan, env)
    assert found.wall[0] >= (found.prompt_tokens + found.completion_tokens) / 10_000 * 60


@pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")
def test_a_fresh_workspace_counts_the_lists_that_need_no_model(runner, tmp_path):
    """τ-bench's task list is read, not generated: before any run the estimate walks it and
    counts each task's dialog (20 of tasks_dev), instead of a guessed fan-out."""
    tasks = json.loads((TAU_BENCH / "retail" / "tasks_dev.json").read_text())
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "retail"),
                                 "--tasks", "tasks_dev.json", "--agent", "openai-tools",
                                 "--workspace", str(tmp_path / "ws"), "--estimate"])
    assert result.exit_code == 0, result.output
    rows = {m[1]: int(m[2]) for line in result.output.splitlines() if (m := ROW.match(line))}
    assert rows["dialogs"] == len(tasks)
    assert not (tmp_path / "ws").exists()
    # a task file that is not there: one line and exit 2, as the run itself says it
    result = runner.invoke(cli, ["run", "airline", "--pipeline", "tau-bench", "--workspace", str(tmp_path / "ws"),
                                 "--estimate"])
    assert result.exit_code == 2 and "task file 'tasks_test.json' not found" in result.output, result.output


def test_an_earlier_run_in_another_environment_measures_nothing_of_this_one(runner, tmp_path):
    """A retail run's policy graph and dialogs say nothing of airline's: the airline estimate in
    that workspace is airline's own, not the retail run's figures."""
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--events", "3", "--workspace", str(ws)])
    assert result.exit_code in (0, 1), result.output
    cold = estimate(runner, tmp_path / "cold", events=10)
    found = estimate(runner, ws, events=10)
    assert not any(v["from"].startswith("run ") for v in found["steps"].values()), found["output"]
    assert (found["calls"], found["tokens"]) == (cold["calls"], cold["tokens"])
    # the same environment with another agent prompt is another world too
    prompt = tmp_path / "prompt.md"
    prompt.write_text((REPO / "environments" / "airline" / "prompt.md").read_text() + "\nBe brief.\n")
    run(runner, ws)
    assert estimate(runner, ws, events=10)["steps"]["graph"]["from"].startswith("run ")
    other = estimate(runner, ws, "--prompt", str(prompt), events=10)
    assert not any(v["from"].startswith("run ") for v in other["steps"].values()), other["output"]


def test_a_request_made_again_for_an_item_is_measured_once(runner, tmp_path):
    """Running the same items again with --no-cache records each request a second time for the
    same item: the figures per item are those of making it once, not twice."""
    ws = tmp_path / "ws"
    run(runner, ws)
    once = estimate(runner, ws, "--no-cache", events=12)
    run(runner, ws, "--no-cache")
    again = estimate(runner, ws, "--no-cache", events=12)
    assert again["steps"]["dialogs"]["from"].startswith("run ")
    assert (again["calls"], again["tokens"]) == (once["calls"], once["tokens"])


def test_an_unfinished_items_calls_in_the_cache_are_not_priced_again(runner, tmp_path):
    """A run killed after its dialogs' calls were answered but before their items were written
    (items are committed after the calls that made them): the dialogs are to make again, but
    every call they ask is in the cache, so the estimate prices none of them, as the run then
    sends none."""
    ws = tmp_path / "ws"
    run(runner, ws)
    with sqlite3.connect(ws / "intellagent.db") as conn:
        dialogs = conn.execute("SELECT count(*) FROM items WHERE step = 'intellagent/policy-user'").fetchone()[0]
        conn.execute("DELETE FROM items WHERE step IN ('intellagent/policy-user', 'intellagent/policy-critic')")
    assert dialogs == 6
    found = estimate(runner, ws)
    assert (found["steps"]["dialogs"]["items"], found["steps"]["dialogs"]["calls"]) == (6, 0), found["output"]
    assert "calls in the cache" in found["steps"]["dialogs"]["from"]
    result = runner.invoke(cli, ["run", "airline", "--events", "6", "--workspace", str(ws)])
    assert result.exit_code in (0, 1), result.output
    with sqlite3.connect(ws / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        sent, = conn.execute("SELECT count(*) FROM llm_calls WHERE run_id = ? AND cached = 0 AND role IN "
                             "('user', 'agent')", (run_id,)).fetchone()
        answered, = conn.execute("SELECT count(*) FROM llm_calls WHERE run_id = ? AND cached = 1", (run_id,)).fetchone()
    assert sent == 0 and answered > 0
    # without the cache every call is asked again, and priced
    assert estimate(runner, ws, "--no-cache")["steps"]["dialogs"]["calls"] > 0


def test_the_estimate_says_whether_each_budget_holds_the_run(runner, tmp_path):
    """A budget that holds says so, and a token budget is compared too (a dollar budget on an
    unpriced model: tests/test_prices.py)."""
    local = ["--set", "llm.default.base_url=http://127.0.0.1:9/v1"]
    # with a token budget beside it the run starts on an unpriced model: the tokens are compared
    found = estimate(runner, tmp_path / "ws", "--model", "my-local-model", "--budget", "1",
                     "--set", "llm.budget_tokens=1000", *local)
    assert found["dollars"] == "unknown (no price for my-local-model)"
    assert "the token budget (1,000 tokens) would stop it at about 0%" in found["output"]
    plenty = estimate(runner, tmp_path / "ws", "--model", "gpt-4o-mini", "--budget", "1000",
                      "--set", "llm.budget_tokens=1000000000", *local)
    assert f"the budget ($1000) holds the estimated {plenty['dollars']}" in plenty["output"]
    held = re.search(r"the token budget \(1,000,000,000 tokens\) holds the estimated ([\d,]+) tokens",
                     plenty["output"])
    assert held and int(held[1].replace(",", "")) == pytest.approx(plenty["tokens"], abs=1)
    nothing = estimate(runner, tmp_path / "ws", "--model", "gpt-4o-mini", "--budget", "0", *local)
    assert "the budget ($0) would stop it at about 0% of its model calls" in nothing["output"]
    assert not (tmp_path / "ws").exists()


def test_the_wall_time_spreads_the_calls_over_every_process_of_the_run():
    """Each process of the processes executor has its own llm.max_concurrency: four workers of two
    slots each hold eight calls in flight, not two."""
    registry = load_registry()
    env = load_environment(REPO / "environments" / "airline")
    base = model_overrides("gpt-4o-mini") + [("llm.max_concurrency", 2, "test")]
    alone = estimate_plan(load_plan(None, registry, overrides=base), env)
    spread = estimate_plan(load_plan(None, registry, overrides=base + [
        ("executor", {"use": "processes"}, "test"), ("executor.with.workers", 4, "test")]), env)
    assert spread.calls == alone.calls
    # the calls over two slots at 0.5 s, besides the run's own start and report
    assert alone.wall[0] - alone.own[0] == pytest.approx(math.ceil(alone.calls / 2) * 0.5)
    assert spread.wall[0] - spread.own[0] == pytest.approx(math.ceil(spread.calls / 8) * 0.5)


def test_a_step_that_talks_to_the_agent_without_roles_of_its_own_counts_the_agents_calls(runner, tmp_path):
    """ToolTalk's replay declares no role: it only asks the agent under test. Its agent's calls
    are the run's calls (the model agent's), so the cold estimate counts them, and none for an
    agent behind HTTP, whose model is not ours."""
    args = ["run", "tooltalk", "--pipeline", "tooltalk", "--set", "steps.conversations.with.limit=3",
            "--workspace", str(tmp_path / "ws"), "--estimate"]
    rows = {}
    for name, extra in (("model", []), ("http", ["--agent", "http", "--set", "agent.with.url=http://127.0.0.1:9/turn"])):
        result = runner.invoke(cli, [*args, *extra])
        assert result.exit_code == 0, result.output
        rows[name] = {m[1]: (int(m[2]), int(m[4])) for line in result.output.splitlines() if (m := ROW.match(line))}
    assert rows["model"]["replays"][0] == 3 and rows["model"]["replays"][1] >= 3
    assert rows["http"]["replays"] == (3, 0)


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None, reason="pip install --no-deps nvidia-tooltalk")
def test_the_replay_estimate_is_what_an_agent_making_the_ground_truths_calls_asks(runner, tmp_path, monkeypatch):
    """ToolTalk's replay estimates its agent's calls as those of an agent that makes the ground
    truth's calls, one at a time, and then replies: what the oracle reference agent does. Every
    call the oracle is asked in a real replay of both sets is counted, with its prompt as the
    estimate counts one (its messages and the tools offered, four characters a token)."""
    from intellagent_plugins.tooltalk.agents import OracleAgent

    asked: list[float] = []
    step = OracleAgent.step

    async def counted(self, messages, tools):
        asked.append(len(json.dumps(messages, ensure_ascii=False) + json.dumps(tools, ensure_ascii=False)) / 4)
        return await step(self, messages, tools)

    monkeypatch.setattr(OracleAgent, "step", counted)
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--agent", "tooltalk/oracle",
                                 "--workspace", str(tmp_path / "oracle")])
    assert result.exit_code == 0, result.output
    rows = {m[1]: (int(m[2]), int(m[4]), int(m[5])) for line in runner.invoke(cli, [
        "run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path / "model"), "--estimate"]).output.splitlines()
        if (m := ROW.match(line))}
    items, calls, prompt = rows["replays"]
    assert items == 78
    assert calls == pytest.approx(len(asked), rel=0.02), (calls, len(asked))
    assert prompt == pytest.approx(sum(asked), rel=0.25), (prompt, sum(asked))


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None, reason="pip install --no-deps nvidia-tooltalk")
def test_the_replay_estimate_is_of_the_conversations_the_run_picks(runner, tmp_path, monkeypatch):
    """The replay's estimate is of the conversations the run replays (its sets, limit, names or
    folder), not the mean of the package's: the easy set's were estimated at 178 calls, the mean
    conversation of both sets being longer than an easy one, where the oracle is asked 81 times."""
    from intellagent_plugins.tooltalk.agents import OracleAgent

    asked = 0
    step = OracleAgent.step

    async def counted(self, messages, tools):
        nonlocal asked
        asked += 1
        return await step(self, messages, tools)

    monkeypatch.setattr(OracleAgent, "step", counted)
    easy = ["run", "tooltalk", "--pipeline", "tooltalk", "--sets", "[easy]"]
    result = runner.invoke(cli, [*easy, "--agent", "tooltalk/oracle", "--workspace", str(tmp_path / "oracle")])
    assert result.exit_code == 0, result.output
    rows = {m[1]: (int(m[2]), int(m[4])) for line in runner.invoke(cli, [
        *easy, "--workspace", str(tmp_path / "model"), "--estimate"]).output.splitlines() if (m := ROW.match(line))}
    assert rows["replays"][0] == 28
    assert rows["replays"][1] == pytest.approx(asked, rel=0.02), (rows["replays"], asked)


def test_an_item_cut_short_by_errors_measures_nothing(runner, tmp_path, monkeypatch):
    """A finished run whose policy graph ended as an infra error (the server failed every call):
    the graph's one failed call is not what making the graph takes, so the estimate keeps the
    step's own figures for it."""
    from intellagent.testing.openai_server import OpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    ws = tmp_path / "ws"
    with OpenAIServer(fault_rate=1.0, fault_kinds=["500"]) as server:
        model = ["--set", f"llm.default={{model: gpt-4o-mini, base_url: '{server.base_url}'}}",
                 "--set", "llm.max_retries=0"]
        result = runner.invoke(cli, ["run", "airline", "--events", "3", "--workspace", str(ws), *model])
        assert "infra-error" in result.output, result.output
        with sqlite3.connect(ws / "intellagent.db") as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("done",)]
            assert conn.execute("SELECT count(*) FROM llm_calls WHERE outcome = 'infra-error'").fetchone()[0] >= 1
        found = estimate(runner, ws, *model)["steps"]["graph"]
        cold = estimate(runner, tmp_path / "cold", *model)["steps"]["graph"]
    assert not found["from"].startswith("run "), found
    assert found["calls"] == cold["calls"] and found["prompt"] == cold["prompt"]


def items_wall(output: str) -> tuple[float, float]:
    """The wall time an estimate prints less the run's own time (its start, its report)."""
    (low, high), (own_low, own_high) = (map(seconds, r.search(output).groups()) for r in (WALL, OWN))
    return low - own_low, high - own_high


def test_an_earlier_run_of_other_models_or_endpoints_measures_nothing_and_is_not_named(runner, tmp_path,
                                                                                      openai_server, monkeypatch):
    """A run on mock/schema (answers in no time) says nothing of gpt-4o-mini's calls nor of how
    long they take, and a pilot on a local test server nothing of the same model name elsewhere:
    the estimate is the steps' own, its wall time too, and no step says it comes from that run."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    ws = tmp_path / "ws"
    run(runner, ws)  # mock/schema
    other = ["--set", "llm.default={model: gpt-4o-mini, base_url: 'http://127.0.0.1:9/v1'}"]
    cold = estimate(runner, tmp_path / "cold", *other)
    found = estimate(runner, ws, *other)
    assert (found["calls"], found["tokens"]) == (cold["calls"], cold["tokens"])
    # its items' wall time too (the run's own start and report it measures, whatever its models)
    assert items_wall(found["output"]) == pytest.approx(items_wall(cold["output"]), abs=1)
    for name in ("graph", "events", "dialogs", "verdicts"):
        assert not found["steps"][name]["from"].startswith("run "), found["output"]
    # a pilot on the test server measures the model there, not the same name at another endpoint
    here = ["--set", f"llm.default={{model: gpt-4o-mini, base_url: '{openai_server.base_url}'}}"]
    run(runner, tmp_path / "pilot", *here)
    assert estimate(runner, tmp_path / "pilot", *here, events=12)["steps"]["dialogs"]["from"].startswith("run ")
    elsewhere = estimate(runner, tmp_path / "pilot", *other, events=12)
    assert not elsewhere["steps"]["dialogs"]["from"].startswith("run "), elsewhere["output"]


def test_the_estimate_over_a_workspace_sends_nothing_and_writes_nothing(runner, tmp_path, openai_server,
                                                                         monkeypatch):
    """Over a workspace with a run in it, with every option that starts something in a run (other
    processes, a budget): no request reaches the server and the store's bytes are unchanged."""
    import hashlib

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    ws = tmp_path / "ws"
    here = ["--set", f"llm.default={{model: gpt-4o-mini, base_url: '{openai_server.base_url}'}}"]
    run(runner, ws, *here)
    served = openai_server.served
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in ws.glob("intellagent.db*")
              if not p.name.endswith("-shm")}
    found = estimate(runner, ws, *here, "--executor", "processes", "--workers", "2", "--budget", "1", events=12)
    assert found["steps"]["events"]["reused"] == 6 and found["calls"] > 0
    assert openai_server.served == served
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in ws.glob("intellagent.db*")
            if not p.name.endswith("-shm")} == before


LIKELY = re.compile(r"likely (\d+) to (\d+) calls \(95 %, ±(\d+) %\), if the items to make vary as the "
                    r"measured ones did \((.*?)\)")


def test_after_a_run_the_calls_get_a_range_from_how_much_its_items_varied_and_the_run_falls_in_it(runner, tmp_path):
    ws = tmp_path / "ws"
    demo = ("--model", "mock/demo")  # scripted dialogs of different lengths, as a model's are
    cold = estimate(runner, ws, *demo, events=30)
    assert not LIKELY.search(cold["output"])  # nothing measured: no spread to give
    run(runner, ws, *demo, events=10)
    found = estimate(runner, ws, *demo, events=30)
    likely = LIKELY.search(found["output"])
    assert likely, found["output"]
    low, high = int(likely[1]), int(likely[2])
    assert low < found["calls"] < high
    assert "10 dialogs" in likely[4] and "10 events" in likely[4]
    made, _ = run(runner, ws, *demo, events=30)
    assert low <= made <= high, (low, made, high)
    # measured over the 30 events, a range for 60 is narrower for each item than the 10's gave
    wider = int(likely[3])
    again = LIKELY.search(estimate(runner, ws, *demo, events=60)["output"])
    assert again and "30 dialogs" in again[4] and int(again[3]) < wider


def test_the_estimate_needs_no_api_key_and_names_the_one_the_run_will_need(runner, tmp_path, monkeypatch):
    """An estimate calls no model, so a real model while offline or a missing key does not stop
    it, as they stopped `--estimate` before; it says under the table which roles the run itself
    would refuse, and the run still refuses them (exit 2)."""
    ws = tmp_path / "ws"
    model = "--set", "llm.roles.user={model: gpt-4o-mini, api_key_env: NO_SUCH_KEY_FOR_TESTS}"

    def stops(output: str) -> list[str]:
        return [line for line in output.splitlines() if "the run itself would stop" in line]

    found = estimate(runner, ws, *model)  # tests run with INTELLAGENT_OFFLINE set
    assert found["steps"]["dialogs"]["calls"] > 0
    assert stops(found["output"]) == ["  the run itself would stop: model 'gpt-4o-mini' at the OpenAI API "
                                      "is not local and INTELLAGENT_OFFLINE is set (tests may only use "
                                      "mock/... models or 127.0.0.1) (role user)"]
    # no key (nothing can reach the network: the run is refused before its first call)
    monkeypatch.delenv("INTELLAGENT_OFFLINE")
    monkeypatch.delenv("NO_SUCH_KEY_FOR_TESTS", raising=False)
    found = estimate(runner, ws, *model, "--set", "llm.roles.critic={model: gpt-4o, api_key_env: NO_SUCH_KEY_FOR_TESTS}")
    assert stops(found["output"]) == [  # the roles in order, each message once
        "  the run itself would stop: no API key for model 'gpt-4o': set NO_SUCH_KEY_FOR_TESTS (role critic)",
        "  the run itself would stop: no API key for model 'gpt-4o-mini': set NO_SUCH_KEY_FOR_TESTS (role user)"]
    refused = runner.invoke(cli, ["run", "airline", "--events", "2", "--workspace", str(ws), *model])
    assert refused.exit_code == 2 and "no API key" in refused.output and "NO_SUCH_KEY_FOR_TESTS" in refused.output
    assert not ws.exists()
    # a provider that cannot be made for another reason still stops the estimate
    bad = runner.invoke(cli, ["run", "airline", "--events", "2", "--workspace", str(ws), "--estimate",
                              "--set", "llm.roles.user={model: gpt-4o-mini, provider: no-such-provider}"])
    assert bad.exit_code == 2 and "no-such-provider" in bad.output


def made(ws: Path) -> tuple[dict[str, int], dict[str, int]]:
    """The latest run's items per step, and the model calls per step it sent."""
    with sqlite3.connect(ws / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        items = dict(conn.execute("SELECT step, count(*) FROM run_items WHERE run_id = ? GROUP BY step", (run_id,)))
        calls = dict(conn.execute("SELECT stage, count(*) FROM llm_calls WHERE run_id = ? AND cached = 0 "
                                  "GROUP BY stage", (run_id,)))
    return items, calls


def estimated_then_made(runner, args: list[str], ws: Path) -> tuple[dict[str, dict], dict[str, int], dict[str, int]]:
    """The cold estimate of ``intellagent ARGS`` (its rows), then the run: its items and calls per step."""
    found = runner.invoke(cli, [*args, "--estimate"])
    assert found.exit_code == 0, found.output
    result = runner.invoke(cli, args)
    assert result.exit_code in (0, 1), result.output
    return (rows_of(found.output), *made(ws))


def rows_of(output: str) -> dict[str, dict]:
    return {m[1]: {"items": int(m[2]) + int(m[3]), "calls": int(m[4]), "tokens": int(m[5]) + int(m[6]),
                   "source": m[8]}
            for line in output.splitlines() if (m := ROW.match(line))}


def test_almitas_cold_estimate_counts_the_items_its_run_makes(runner, tmp_path):
    """ALMITA's fan-out: its intents and procedures are the environment's (read, not written: no
    call), each graph gives ``paths`` paths and each conversation a handful of tests. The cold
    estimate guessed ten elements at every list (10 procedures, 100 graphs, 10,000 test runs:
    11,411 calls where the run makes 54); it now counts each step's items as the run makes them
    and is within 25 % of its calls."""
    args = ["run", "almita", "--pipeline", "almita", "--paths", "2", "--model", "mock/function",
            "--set", "llm.default.options.function=tests.almita_script:answer", "--workspace", str(tmp_path / "ws")]
    rows, items, calls = estimated_then_made(runner, args, tmp_path / "ws")
    for step in ("intents", "procedures", "apis", "flowgraphs", "graphs", "noisy", "paths", "conversations", "tests"):
        assert rows[step]["items"] == items[step], (step, rows[step], items[step])
        assert rows[step]["calls"] == calls.get(step, 0) or step == "noisy", (step, rows[step], calls.get(step))
    assert rows["runs"]["items"] == pytest.approx(items["runs"], rel=0.25)
    total = sum(r["calls"] for r in rows.values())
    assert total == pytest.approx(sum(calls.values()), rel=0.25), (total, calls)


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None, reason="pip install --no-deps nvidia-tooltalk")
def test_tooltalk_generations_cold_estimate_counts_its_scenarios_and_the_writers_calls(runner, tmp_path):
    """tooltalk-generate asks ``per_request`` scenarios of each request, and writes each
    conversation in a draft, a repair where its calls fail, and the replies' rewrite: the cold
    estimate guessed ten scenarios a request and one call a conversation (40 conversations, 40
    writer calls, where the run writes 4 in 11 calls)."""
    args = ["run", "tooltalk", "--pipeline", "tooltalk-generate", "--requests", "4", "--scenarios", "1",
            "--set", "llm.default.model=mock/function", "--set", "llm.default.options.function=tests.tooltalk_writer:reply",
            "--agent", "tooltalk/oracle", "--workspace", str(tmp_path / "ws")]
    rows, items, calls = estimated_then_made(runner, args, tmp_path / "ws")
    for step in ("subsets", "scenarios", "conversations"):
        assert rows[step]["items"] == items[step], (step, rows[step], items[step])
    assert rows["scenarios"]["calls"] == calls["scenarios"]
    assert rows["conversations"]["calls"] == pytest.approx(calls["conversations"], rel=0.25), \
        (rows["conversations"], calls["conversations"])


USERS = itertools.count()


def distinct_candidates(request, response_model):
    """tests.test_apigen_mt's model, whose simulated user's candidates differ (as a model's
    samples do), so the judge picks one at every turn."""
    from tests.test_apigen_mt import fake_model

    out = fake_model(request, response_model)
    if getattr(response_model, "__name__", "") == "UserTurn":
        out = {**out, "message": f"{out['message']} ({next(USERS)})"}
    return out


def test_apigen_mts_cold_estimate_counts_its_tasks_and_every_candidate_of_a_user_turn(runner, tmp_path):
    """APIGen-MT's lists: ``pairs`` combined tasks, ``trials`` events per task (a blueprint or a
    combined task); the cold estimate guessed ten of each (10 combined, 10 events where the run
    makes 2 and 16). Each user turn of its best-of-N user asks ``candidates`` samples and the
    judge: the estimate counted one user call a turn and no judge."""
    from intellagent_plugins.dialogue.simulator import UserAgent

    args = ["run", "retail", "--pipeline", "apigen-mt", "--blueprints", "6", "--pairs", "2", "--trials", "2",
            "--set", "llm.default.model=mock/function",
            "--set", "llm.default.options.function=tests.test_estimate:distinct_candidates",
            "--set", "steps.contexts.with.user_pool=2", "--workspace", str(tmp_path / "ws")]
    rows, items, calls = estimated_then_made(runner, args, tmp_path / "ws")
    for step in ("blueprints", "combined", "events", "dialogs"):
        assert rows[step]["items"] == items[step], (step, rows[step], items[step])
    for step in ("blueprints", "combined"):
        assert rows[step]["calls"] == pytest.approx(calls[step], rel=0.25), (step, rows[step], calls[step])

    with sqlite3.connect(tmp_path / "ws" / "intellagent.db") as conn:
        asked = dict(conn.execute("SELECT role, count(*) FROM llm_calls WHERE stage = 'dialogs' GROUP BY role"))
    turns = asked["user-judge"]  # the candidates differ at every turn: one judge call a turn
    env = load_environment(REPO / "environments" / "retail")
    plan = load_plan("apigen-mt", load_registry())
    dialog = plan.steps["dialogs"].plugin.estimate(env)
    plain = UserAgent.estimate(plan.steps["dialogs"].plugin, env).roles["user"].calls  # user turns
    assert dialog.roles["user"].calls / plain == asked["user"] / turns == 3
    assert dialog.roles["user-judge"].calls / plain == 1


def test_after_a_pilot_a_role_it_never_called_is_measured_at_none(runner, tmp_path):
    """APIGen-MT after a pilot whose simulated users' candidates were all alike: the judge was
    never asked, and the estimate still added its guessed calls to each dialog's measured ones
    (12 calls a dialog where 7 were made); the events of the blueprints the pilot made, which
    the store holds, were counted again."""
    ws = tmp_path / "ws"
    model = ["--set", "llm.default.model=mock/function", "--set", "llm.default.options.function=tests.test_apigen_mt:fake_model",
             "--set", "steps.contexts.with.user_pool=2", "--pairs", "1", "--trials", "2", "--workspace", str(ws)]
    pilot = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--blueprints", "2", *model])
    assert pilot.exit_code in (0, 1), pilot.output
    found = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--blueprints", "6", *model, "--estimate"])
    assert found.exit_code == 0, found.output
    rows = rows_of(found.output)
    result = runner.invoke(cli, ["run", "retail", "--pipeline", "apigen-mt", "--blueprints", "6", *model])
    assert result.exit_code in (0, 1), result.output
    _, calls = made(ws)
    assert rows["dialogs"]["calls"] == pytest.approx(calls["dialogs"], rel=0.25), (rows["dialogs"], calls["dialogs"])
    total = sum(r["calls"] for r in rows.values())
    assert total == pytest.approx(sum(calls.values()), rel=0.25), (total, calls)


def test_after_a_pilot_the_items_its_invalid_items_stopped_are_not_counted(runner, tmp_path):
    """An item that halts (ALMITA's flowgraph a rule rejects, tooltalk-generate's conversation
    whose calls fail) stops its later steps. On mock/schema every ALMITA flowgraph breaks a
    rule: after a pilot that measured it, the estimate of a run of new flowgraphs (another seed)
    still counted the graphs, noise, conversations and test runs of each (60 calls where the
    run makes 4)."""
    ws = tmp_path / "ws"
    args = ["run", "almita", "--pipeline", "almita", "--paths", "2", "--workspace", str(ws)]
    pilot = runner.invoke(cli, args)
    assert pilot.exit_code in (0, 1), pilot.output
    found = runner.invoke(cli, [*args, "--seed", "1", "--estimate"])
    assert found.exit_code == 0, found.output
    rows = rows_of(found.output)
    result = runner.invoke(cli, [*args, "--seed", "1"])
    assert result.exit_code in (0, 1), result.output
    items, calls = made(ws)
    assert rows["flowgraphs"]["items"] == items["flowgraphs"] == 4
    total = sum(r["calls"] for r in rows.values())
    assert total == pytest.approx(sum(calls.values()), rel=0.25), (found.output, calls)


def test_after_a_pilot_the_elements_its_lists_dropped_are_not_counted(runner, tmp_path):
    """APIGen-MT pairs and tasks are made of the blueprints it accepted only, fewer than its
    options ask for. On mock/schema no blueprint passes its checks: after a pilot that measured
    it, the estimate of a run of more blueprints still counted the combined blueprints, the
    tasks and their dialogs of every blueprint asked for (356 calls where the run made 12)."""
    ws = tmp_path / "ws"
    args = ["run", "retail", "--pipeline", "apigen-mt", "--trials", "2", "--workspace", str(ws)]
    pilot = runner.invoke(cli, [*args, "--blueprints", "2", "--pairs", "1"])
    assert pilot.exit_code in (0, 1), pilot.output
    rows, items, calls = estimated_then_made(runner, [*args, "--blueprints", "6", "--pairs", "2"], ws)
    assert items["blueprints"] == 6 and items.get("events", 0) == 0  # what the run made: no task
    assert rows["events"]["items"] == rows["dialogs"]["calls"] == 0
    assert "it made 0 of the 4 elements asked there" in rows["tasks"]["source"]
    assert sum(r["calls"] for r in rows.values()) == pytest.approx(sum(calls.values()), rel=0.25)


def slow_agent(messages, tools):
    """An agent that is not our model and takes its time: a Python callable, as one behind HTTP."""
    time.sleep(0.8)
    return "Let me look into that for you."


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> None:
    """This process has run a pipeline once: a pilot in a process that imports what a run needs
    as it goes measures a start the next run in that process no longer takes (2.7 s against 0.1 s
    here), where the command's every run starts a process of its own."""
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["run", "airline", "--events", "1", "--workspace",
                                      str(tmp_path_factory.mktemp("warm"))])
    assert result.exit_code in (0, 1), result.output


def test_after_a_pilot_the_wall_time_counts_the_time_an_agent_not_ours_takes(runner, tmp_path, warm):
    """An agent behind HTTP or in Python takes its own time between the simulated user's calls;
    the wall time counted only our calls (after a pilot on mock models: 0 s for a run of
    several seconds). It now measures an item from its first request to its last answer, and
    spreads the items in rounds of those in progress (2 model slots: 4 items at once)."""
    ws = tmp_path / "ws"
    agent = ["--agent", "python", "--set", "agent.with.callable=tests.test_estimate:slow_agent",
             "--set", "llm.max_concurrency=2"]
    assert run(runner, ws, *agent, events=2)
    found = estimate(runner, ws, *agent, events=8)
    low, high = map(seconds, WALL.search(found["output"]).groups())
    started = time.monotonic()
    run(runner, ws, *agent, events=8)
    took = time.monotonic() - started
    assert low - 0.05 <= took <= high + 0.05, (found["output"], took)  # (printed to a tenth of a second)
    assert took > 2  # two rounds of dialogs of one or more of the agent's turns each


START, REPORT_ITEM = 0.6, 0.04  # seconds the slow plugin's run takes to start, and its report an item


class SlowReport(Reporter):
    """A report that takes its time over each item it covers, as the HTML of long transcripts does."""

    name = "slow-report"
    filename = "slow.txt"

    def write(self, report, data, folder, views):
        items = sum(1 for _ in data.items())
        time.sleep(REPORT_ITEM * items)
        path = folder / self.filename
        path.write_text(f"{items} items\n")
        return path


def slow_plugin() -> types.ModuleType:
    """A run that takes its time to start (a plugin setting up before the first item, as a tracer
    connecting does) and to report."""
    plugin = types.ModuleType("slow_run")
    plugin.register_reporters = hookimpl(lambda register: register(SlowReport))
    plugin.before_run = hookimpl(lambda run: time.sleep(START))
    return plugin


def test_the_wall_time_counts_the_runs_own_start_and_report_as_the_earlier_run_measured_them(runner, tmp_path,
                                                                                            warm):
    """A run's wall time is not only its items': it starts (imports, the environment, plugins) and
    writes its report, which for a small run is much of it. The estimate left both out (after a
    1-event pilot, 8 events estimated at 0 s to 0 s for a run of 2.3 s). The pilot records them;
    the estimate counts its start as it was and its report for the items it will cover (26 here,
    5 there), and the range holds what the run then takes."""
    ws = tmp_path / "ws"
    slow = slow_plugin()
    options = ["--workspace", str(ws), "--set", "report=[json, slow-report]"]

    def invoke(*extra: str, events: int) -> tuple[str, float]:
        started = time.monotonic()
        result = runner.invoke(cli, ["run", "airline", *options, *extra, "--events", str(events)],
                               obj={"plugins": (slow,)})
        assert result.exit_code in (0, 1), result.output
        return result.output, time.monotonic() - started

    cold, _ = invoke("--estimate", events=8)
    assert "its start and report, guessed (a finished run in the workspace measures them)" in cold
    invoke(events=1)
    found, _ = invoke("--estimate", events=8)
    assert float(re.search(r"its start \(([\d.]+) s in run ", found)[1]) >= START, found
    low, high = map(seconds, WALL.search(found).groups())
    _, took = invoke(events=8)
    assert took > START + 26 * REPORT_ITEM  # the run's own time is most of it
    assert low - 0.05 <= took <= high + 0.05, (found, took)


class SlowNumbersConfig(StrictModel):
    items: int = 2
    pause: float = 0.0


class SlowNumbers(Sampler):
    """A list made without a model that takes its time (as reading a dataset does)."""

    name = "slow-numbers"
    Config = SlowNumbersConfig
    output = list[progress_steps.Number]

    def run(self, ctx):
        time.sleep(self.config.pause)
        return [progress_steps.Number(id=f"N{i}", value=i) for i in range(self.config.items)]


class MullConfig(StrictModel):
    pause: float = 0.0


class Mull(Generator):
    """An item made of a model's item without a model, that takes its time (as building an
    event's database does), holding the process meanwhile."""

    name = "mull"
    Config = MullConfig
    inputs = {"number": progress_steps.Number}
    output = progress_steps.Number

    def run(self, ctx, number):
        time.sleep(self.config.pause)
        return number


def test_the_wall_time_counts_the_steps_that_call_no_model(runner, shop, tmp_path, warm):
    """A step that calls no model still takes time: a list read before the first call (the walk
    makes it, and times it), the items made of a model's items (the earlier run timed them; the
    walk cannot make them). The estimate counted none of it (after a pilot of 2 numbers, 8
    estimated at 0 s to 0 s for a run of 1.3 s)."""
    plugin = types.ModuleType("slow_steps")
    plugin.INTELLAGENT_NAMESPACE = "acme"
    plugin.register_stages = hookimpl(lambda register: [register(SlowNumbers), register(progress_steps.Pay),
                                                        register(Mull)])
    pipeline = tmp_path / "slow.yaml"
    pipeline.write_text(json.dumps({
        "llm": {"default": {"model": "mock/schema"}},
        "steps": {"numbers": {"use": "acme/slow-numbers", "with": {"pause": 0.6}},
                  "cheap": {"use": "acme/pay", "each": "numbers"},
                  "mull": {"use": "acme/mull", "each": "cheap", "with": {"pause": 0.1}}},
        "params": {"items": "steps.numbers.with.items"}, "report": []}))

    def invoke(*extra: str) -> tuple[str, float]:
        started = time.monotonic()
        result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace",
                                     str(tmp_path / "ws"), *extra], obj={"plugins": (plugin,)})
        assert result.exit_code == 0, result.output
        return result.output, time.monotonic() - started

    invoke("--items", "2")
    found, _ = invoke("--items", "8", "--estimate")
    assert "the steps that call no model" in found
    low, high = map(seconds, WALL.search(found).groups())
    _, took = invoke("--items", "8")
    assert took > 0.6 + 6 * 0.1  # the new list, and the 6 items made of new model items
    assert low - 0.05 <= took <= high + 0.05, (found, took)
