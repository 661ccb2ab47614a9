"""Cost you can predict and bound: real prices for every model (genai-prices' table, the run's own
over it), cached prompt tokens priced as such, an unpriced model named at the start (and refused
under a dollar budget), and a budget never overshot."""

from __future__ import annotations

import asyncio
import re
import sqlite3

import pytest

from intellagent.cli import cli
from intellagent.llm import LLM
from intellagent.llm.prices import PriceTable
from intellagent.llm.types import Usage
from intellagent.pipeline import LLMSettings, ModelSettings, Price
from intellagent.testing.openai_server import OpenAIServer
from intellagent_plugins.reporters.writers import read_report


@pytest.mark.parametrize("model,input,output,cached", [
    ("gpt-4o-mini", 0.15, 0.60, 0.075), ("gpt-4o-mini-2024-07-18", 0.15, 0.60, 0.075),
    ("openai/gpt-4o-mini", 0.15, 0.60, 0.075), ("claude-sonnet-4", 3.0, 15.0, 0.30),
    ("claude-sonnet-4-20250514", 3.0, 15.0, 0.30), ("gemini-2.5-flash", 0.30, 2.50, 0.03),
])
def test_models_of_every_provider_have_their_price(model, input, output, cached):
    price = PriceTable().price(model)
    assert price is not None and price.source == "genai-prices"
    assert (price.input, price.output, price.cached_input) == pytest.approx((input, output, cached))


def test_the_runs_own_prices_win_by_name_then_by_prefix():
    table = PriceTable({"gpt-4o-mini": Price(input=1.0, output=2.0), "my-*": Price(input=5.0, output=6.0)})
    assert table.price("gpt-4o-mini").input == 1.0 and table.price("gpt-4o-mini").source == "llm.prices"
    assert table.price("my-local-model").output == 6.0
    assert table.price("qwen2.5-coder-local") is None  # known to nobody: no price, not zero
    assert table.price("mock/schema").input == 0.0


def library_cost(model, usage, provider=None):
    """What genai-prices' own calculator says ``usage`` of ``model`` costs."""
    from genai_prices import Usage as Spent, calc_price

    return float(calc_price(Spent(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                                  cache_read_tokens=usage.cached_tokens), model, provider_id=provider).total_price)


@pytest.mark.parametrize("prompt", [1_000, 150_000, 250_000])
def test_a_tiered_price_is_charged_at_the_tier_the_prompt_reaches(prompt):
    # gemini-2.5-pro: $1.25/$10 per million, $2.50/$15 for a prompt over 200k tokens
    usage = Usage(prompt_tokens=prompt, cached_tokens=prompt // 2, completion_tokens=800)
    assert PriceTable().cost("gemini-2.5-pro", usage) == pytest.approx(library_cost("gemini-2.5-pro", usage))
    price = PriceTable().price("gemini-2.5-pro")  # the budget's worst case: no token cached, same tier
    assert price.worst(prompt, 800) == pytest.approx(library_cost("gemini-2.5-pro", Usage(
        prompt_tokens=prompt, completion_tokens=800)))


@pytest.mark.parametrize("model,provider,bare", [
    ("groq/llama-3.1-8b-instant", "groq", "llama-3.1-8b-instant"),
    ("openrouter/anthropic/claude-3.5-sonnet", "openrouter", "anthropic/claude-3.5-sonnet"),
    ("bedrock/anthropic.claude-3-sonnet-20240229-v1:0", "aws", "anthropic.claude-3-sonnet-20240229-v1:0"),
    ("together_ai/meta-llama/Llama-3-70b-chat-hf", "together", "meta-llama/Llama-3-70b-chat-hf"),
    ("azure/gpt-4o", "azure", "gpt-4o"), ("anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4"),
])
def test_a_litellm_name_is_priced_by_its_providers_row(model, provider, bare):
    usage = Usage(prompt_tokens=12_000, cached_tokens=2_000, completion_tokens=900)
    assert PriceTable().price(model) is not None, model
    assert PriceTable().cost(model, usage) == pytest.approx(library_cost(bare, usage, provider))


def test_a_price_given_for_a_model_is_not_the_price_of_another_it_prefixes():
    table = PriceTable({"gpt-4o": Price(input=4.0, output=12.0)})
    for same in ("gpt-4o", "gpt-4o-2024-08-06", "openai/gpt-4o", "azure/gpt-4o"):
        assert (table.price(same).input, table.price(same).source) == (4.0, "llm.prices"), same
    mini = table.price("gpt-4o-mini")  # another model, 16x cheaper: the table's price, not the override
    assert (mini.input, mini.source) == (pytest.approx(0.15), "genai-prices")
    assert PriceTable({"my-": Price(input=5.0, output=6.0)}).price("my-local-model") is None  # a prefix needs *
    assert PriceTable({"my-model": Price(input=5.0, output=6.0)}).price("ollama/my-model").input == 5.0


def test_cached_prompt_tokens_are_priced_at_the_cached_rate():
    table = PriceTable()
    usage = Usage(prompt_tokens=10_000, cached_tokens=8_000, completion_tokens=500)
    # 2,000 fresh × 0.15 + 8,000 cached × 0.075 + 500 × 0.60, per million
    assert table.cost("gpt-4o-mini", usage) == pytest.approx(0.0012)
    assert table.cost("gpt-4o-mini", Usage(prompt_tokens=10_000, completion_tokens=500)) == pytest.approx(0.0018)


def test_cached_tokens_a_provider_reports_are_recorded_and_priced(tmp_path):
    with OpenAIServer(prompt_cache=True) as server:
        settings = LLMSettings(default=ModelSettings(model="gpt-4o-mini", base_url=server.base_url,
                                                     api_key_env="TEST_KEY"), cache=False,
                               prices={"gpt-4o-mini": Price(input=1.0, output=1.0, cached_input=0.1)})
        llm = LLM(settings)
        history = [{"role": "system", "content": "x" * 4000}, {"role": "user", "content": "hi"}]

        async def dialog():
            first = await llm.chat(history)
            second = await llm.chat(history + [{"role": "assistant", "content": "hello"},
                                               {"role": "user", "content": "and then?"}])
            return first, second

        import os
        os.environ.setdefault("TEST_KEY", "k")
        first, second = asyncio.run(dialog())
    assert first.usage.cached_tokens == 0 and second.usage.cached_tokens > 900
    fresh = second.usage.prompt_tokens - second.usage.cached_tokens
    expected = (fresh * 1.0 + second.usage.cached_tokens * 0.1 + second.usage.completion_tokens * 1.0) / 1e6
    assert second.cost_usd == pytest.approx(expected)
    rows = llm.store.calls()
    assert [r.cached_tokens for r in rows] == [0, second.usage.cached_tokens]


def run(runner, ws, *extra, events="2"):
    return runner.invoke(cli, ["run", "education", "--events", events, "--workspace", str(ws), *extra])


UNPRICED = ["--set", "llm.default={model: my-local-model, base_url: 'http://127.0.0.1:9/v1', api_key_env: TEST_KEY}"]


def test_a_dollar_budget_refuses_a_model_with_no_price_before_any_call(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "k")
    result = run(runner, tmp_path, *UNPRICED, "--budget", "1")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert "a dollar budget needs every model's price, and there is none for my-local-model (role" in line
    # served on this machine: the hint is a price of 0 (never assumed: a local proxy may charge)
    assert "llm.prices.my-local-model={input: 0, output: 0}" in line and "llm.budget_tokens" in line
    assert not (tmp_path / "intellagent.db").exists() or not sqlite3.connect(
        tmp_path / "intellagent.db").execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    monkeypatch.delenv("INTELLAGENT_OFFLINE", raising=False)  # refused before any call is made
    remote = run(runner, tmp_path, "--set", "llm.default={model: my-remote-model, base_url: "
                 "'http://10.9.9.9:9/v1', api_key_env: TEST_KEY}", "--budget", "1")
    assert remote.exit_code == 2, remote.output
    assert "llm.prices.my-remote-model={input: 2.5, output: 10}" in remote.stderr
    assert "you serve yourself" not in remote.stderr


def test_a_model_with_no_price_is_named_at_the_start_and_the_run_goes_on(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer() as server:
        result = run(runner, tmp_path, "--set", f"llm.roles.user={{model: my-local-model, base_url: "
                     f"'{server.base_url}', api_key_env: TEST_KEY}}")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: no known price for my-local-model (role user): its calls "
                                    "count as $0")


def test_a_budget_is_never_overshot_and_says_what_it_left(runner, tmp_path):
    priced = ["--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}"]

    def spent(ws):
        report = read_report(next(ws.glob("runs/*/report.json")))
        return sum(c["cost_usd"] for c in report["cost"])

    assert run(runner, tmp_path / "free", *priced, events="12").exit_code == 0
    whole = spent(tmp_path / "free")
    # below what the run costs, above one call's worst case (its prompt and output cap: ~$0.5 here)
    budget = 0.75
    assert whole > budget
    result = run(runner, tmp_path / "half", *priced, "--budget", str(budget), events="12")
    assert result.exit_code == 3, result.output  # the budget stopped it
    assert 0 < spent(tmp_path / "half") <= budget
    assert "left unspent" in result.stdout and "run status: budget-exhausted" in result.stdout
    # what the call it could not pay needed, more than what was left
    line = next(x for x in result.stdout.splitlines() if "left unspent" in x)
    left, needed = re.search(r"budget: \$([\d.]+) of .* could cost \$([\d.]+) ", line).groups()
    assert float(needed) > float(left) > 0, line


def test_cost_shows_cached_prompt_tokens(runner, tmp_path):
    assert run(runner, tmp_path).exit_code == 0
    result = runner.invoke(cli, ["cost", "--workspace", str(tmp_path)])
    assert result.exit_code == 0 and "of which" in result.stdout


def test_a_runs_cost_is_the_sum_of_its_calls_at_the_librarys_prices(runner, tmp_path, monkeypatch):
    """Every call's row, the report's cost and the budget's spend agree with genai-prices' own
    calculator over the calls' tokens (cached ones included), for a tiered model too."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer(prompt_cache=True) as server:
        result = run(runner, tmp_path, "--model", "gemini-2.5-pro", "--set", f"llm.default.base_url={server.base_url}",
                     "--set", "llm.default.api_key_env=TEST_KEY", "--budget", "5")
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(tmp_path / "intellagent.db").execute(
        "SELECT prompt_tokens, cached_tokens, completion_tokens, cost_usd FROM llm_calls WHERE NOT cached").fetchall()
    assert len(rows) > 5 and any(cached for _, cached, _, _ in rows)
    for prompt, cached, completion, cost in rows:
        usage = Usage(prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion)
        assert cost == pytest.approx(library_cost("gemini-2.5-pro", usage)), (prompt, cached, completion)
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    spent = sum(c["cost_usd"] for c in report["cost"])
    assert spent == pytest.approx(sum(row[3] for row in rows))
    left = float(re.search(r"budget: \$([\d.]+) of \$5", result.stdout).group(1))
    assert left == pytest.approx(5 - spent, abs=1e-4)


@pytest.mark.parametrize("value,what", [
    ("{input: .inf, output: 1}", "input: Input should be a finite number"),
    ("{input: 1, output: 1e400}", "output: Input should be a finite number"),
    ("{input: 1, output: 2, cached_input: .nan}", "cached_input: Input should be a finite number"),
    ("{input: 2000000, output: 1}", "input: Input should be less than or equal to 1000000"),
    ("{input: true, output: 1}", "input: Input should be a valid number"),
    ("{input: '1.5', output: 1}", "input: Input should be a valid number"),
    ("{input: -1, output: 1}", "input: Input should be greater than or equal to 0"),
])
def test_a_price_that_is_no_finite_number_of_dollars_is_one_line(runner, tmp_path, value, what):
    """An infinite price made every call's cost NaN: an internal error at the first call (exit 3)."""
    from tests.test_bad_input import assert_one_clean_line

    result = run(runner, tmp_path, "--model", "gpt-4o-mini", "--set",
                 "llm.default.base_url=http://127.0.0.1:9/v1", "--set", f"llm.prices.gpt-4o-mini={value}")
    assert_one_clean_line(result, "--set llm.prices.gpt-4o-mini", what)


def test_the_refusals_fix_works_as_written_for_every_unpriced_model(runner, tmp_path, monkeypatch):
    """The line's --set flags, pasted, price every model it names: a name with a dot (qwen2.5:7b,
    gpt-4.1) was split at it (llm.prices.qwen2: missing required key 'input'), and with two
    unpriced models only the first was named."""
    import shlex

    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer() as server:
        models = ["--model", "qwen2.5:7b", "--set", f"llm.default.base_url={server.base_url}",
                  "--set", "llm.default.api_key_env=TEST_KEY", "--set",
                  f"llm.roles.user={{model: my-sim, base_url: '{server.base_url}', api_key_env: TEST_KEY}}"]
        refused = run(runner, tmp_path, *models, "--budget", "1")
        assert refused.exit_code == 2, refused.output
        [line] = refused.stderr.strip().splitlines()
        fix = [word for word in shlex.split(line.split(": give each with ")[1].split(" (dollars")[0])]
        assert fix.count("--set") == 2, line
        result = run(runner, tmp_path, *models, "--budget", "1", *fix)
    assert result.exit_code == 0, result.output
    costs = dict(sqlite3.connect(tmp_path / "intellagent.db").execute(
        "SELECT model, SUM(cost_usd) FROM llm_calls GROUP BY model").fetchall())
    # both priced (at 0: served on this machine, the line says so), neither named unpriced
    assert set(costs) == {"qwen2.5:7b", "my-sim"} and "no known price" not in result.stderr, costs
    assert "0 for a model you serve yourself" in line


def test_a_model_only_a_later_step_uses_is_not_asked_for_under_until(runner, tmp_path, monkeypatch):
    """--until graph calls no simulated user: its model's missing price neither refuses the dollar
    budget nor is warned about (the whole run is still refused)."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer() as server:
        models = ["--model", "gpt-4o-mini", "--set", f"llm.default.base_url={server.base_url}",
                  "--set", "llm.default.api_key_env=TEST_KEY", "--set",
                  f"llm.roles.user={{model: my-sim, base_url: '{server.base_url}', api_key_env: TEST_KEY}}",
                  "--budget", "1"]
        graph = run(runner, tmp_path, *models, "--until", "graph")
        whole = run(runner, tmp_path, *models)
    assert graph.exit_code == 0 and "my-sim" not in graph.output, graph.output
    assert whole.exit_code == 2 and "there is none for my-sim (role user)" in whole.stderr


def test_the_report_and_cost_say_which_models_count_as_zero_dollars(runner, tmp_path, monkeypatch):
    """A paid model with no known price counts $0: what is kept of the run (its summary, report.json,
    report.html, `intellagent cost`) says so, not only the warning at its start."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer() as server:
        result = run(runner, tmp_path, "--set", f"llm.roles.user={{model: my-sim, base_url: "
                     f"'{server.base_url}', api_key_env: TEST_KEY}}")
    assert result.exit_code == 0, result.output
    said = "no known price for my-sim: its calls count as $0, so the cost is a lower bound"
    assert f"cost: {said}" in result.stdout
    folder = next(tmp_path.glob("runs/*"))
    assert read_report(folder / "report.json")["info"]["unpriced"] == ["my-sim"]
    assert said in (folder / "report.html").read_text()
    assert said in runner.invoke(cli, ["cost", "--workspace", str(tmp_path)]).stdout
    priced = run(runner, tmp_path / "priced")  # every model a mock: nothing to say
    assert priced.exit_code == 0 and "no known price" not in priced.output


def test_a_server_that_reports_no_usage_is_charged_its_estimate(monkeypatch):
    """No `usage` in the answer: the call is not free; its tokens are estimated (about four
    characters a token), priced and charged to the budget, for plain and structured calls."""
    from pydantic import BaseModel

    class NoUsage(OpenAIServer):
        def _completion(self, request, *, invalid):
            answer = super()._completion(request, invalid=invalid)
            answer.pop("usage")
            return answer

    class Answer(BaseModel):
        answer: str

    monkeypatch.setenv("TEST_KEY", "k")
    with NoUsage() as server:
        llm = LLM(LLMSettings(default=ModelSettings(model="gpt-4o-mini", base_url=server.base_url,
                                                    api_key_env="TEST_KEY"), cache=False, budget_usd=1.0))
        messages = [{"role": "user", "content": "hello " * 400}]  # 2,400 characters

        async def calls():
            try:
                return await llm.chat(messages), await llm.structured(messages, Answer)
            finally:
                await llm.aclose()

        plain, structured = asyncio.run(calls())
    for outcome in (plain, structured):
        assert outcome.usage.prompt_tokens >= 600 and outcome.usage.completion_tokens > 0
        assert outcome.cost_usd == pytest.approx(PriceTable().cost("gpt-4o-mini", outcome.usage))
    assert llm.spent_usd == pytest.approx(plain.cost_usd + structured.cost_usd) and llm.spent_usd > 0


def test_the_estimate_says_a_dollar_budget_would_refuse_an_unpriced_model(runner, tmp_path, monkeypatch):
    """--estimate with --budget and a model with no price printed 'unknown' and exit 0; the run
    itself then refused to start: the estimate says so before."""
    monkeypatch.setenv("TEST_KEY", "k")
    estimate = run(runner, tmp_path, *UNPRICED, "--budget", "1", "--estimate")
    assert estimate.exit_code == 0, estimate.output
    assert "the dollar budget would refuse to start it: no known price for my-local-model" in estimate.stdout
    tokens = run(runner, tmp_path, *UNPRICED, "--budget", "1", "--set", "llm.budget_tokens=100000", "--estimate")
    assert tokens.exit_code == 0 and "refuse" not in tokens.stdout
    assert run(runner, tmp_path, *UNPRICED, "--budget", "1").exit_code == 2


def test_the_cost_of_a_run_says_an_http_agents_own_calls_are_not_in_it(runner, tmp_path):
    """An HTTP agent's model is its own: the run's cost (summary, report, `intellagent cost`) is
    the harness's only, and says so; an agent on the run's own model role is in it."""
    from tests.test_own_agent import Endpoint, http_agent  # a local HTTP agent

    said = "any model calls the agent under test makes itself are not in it"
    agent = Endpoint()
    try:
        result = run(runner, tmp_path, *http_agent(agent.url))
    finally:
        agent.close()
    assert result.exit_code == 0, result.output
    assert f"cost: {said}" in result.stdout
    folder = next(tmp_path.glob("runs/*"))
    assert read_report(folder / "report.json")["info"]["agent_cost_apart"] is True
    assert said in (folder / "report.html").read_text()
    assert said in runner.invoke(cli, ["cost", "--workspace", str(tmp_path)]).stdout
    own = run(runner, tmp_path / "own")  # openai-tools on the run's `agent` role: counted
    assert own.exit_code == 0 and said not in own.stdout


@pytest.mark.parametrize("given,where", [
    (["--budget", "1"], "error: --budget: a dollar budget needs"),
    (["--set", "llm.budget_usd=1"], "error: --set llm.budget_usd: a dollar budget needs"),
    (["--pipeline", "{file}"], "error: {file}:{line}: llm.budget_usd: a dollar budget needs"),
])
def test_the_budgets_refusal_names_the_budget_as_the_user_gave_it(runner, tmp_path, monkeypatch, given, where):
    """The refusal said llm.budget_usd to a user who typed --budget: it names the flag, or the
    pipeline file's line and the setting's path."""
    from pathlib import Path

    monkeypatch.setenv("TEST_KEY", "k")
    pipeline = tmp_path / "p.yaml"
    shipped = (Path(__file__).parent.parent / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    text = shipped.replace("llm:\n", "llm:\n  budget_usd: 1\n", 1)
    pipeline.write_text(text)
    at = text.splitlines().index("  budget_usd: 1") + 1
    given = [g.format(file=pipeline) for g in given]
    result = run(runner, tmp_path / "ws", *UNPRICED, *given)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(where.format(file=pipeline, line=at)), line
    if "--budget" in given:
        assert "llm.budget_usd" not in line.split(" or give a token budget")[0], line


def test_a_price_key_that_prices_no_model_of_the_run_is_named_at_the_start(runner, tmp_path, monkeypatch):
    """A typo in llm.prices (gpt4o-mini for gpt-4o-mini) left the library's price in force with no
    word: the run and its estimate name the key and the models the run calls; a key that covers
    a model by its snapshot, provider/ spelling or prefix is not named."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer() as server:
        models = ["--model", "gpt-4o-mini-2024-07-18", "--set", f"llm.default.base_url={server.base_url}",
                  "--set", "llm.default.api_key_env=TEST_KEY", "--set", "llm.roles.user.model=mock/schema",
                  "--set", "llm.prices.mock/*={input: 1, output: 1}"]
        typo = run(runner, tmp_path, *models, "--set", "llm.prices.gpt4o-mini={input: 9, output: 9}")
        assert typo.exit_code == 0, typo.output
        warned = [x for x in typo.stderr.splitlines() if "gpt4o-mini" in x]
        assert warned == ["warning: llm.prices key 'gpt4o-mini' prices no model this run calls (its models: "
                          "gpt-4o-mini-2024-07-18, mock/schema): its price is not used; check its spelling"], \
            typo.stderr
        rows = sqlite3.connect(tmp_path / "intellagent.db").execute(
            "SELECT prompt_tokens, completion_tokens, cached_tokens, cost_usd FROM llm_calls "
            "WHERE model = 'gpt-4o-mini-2024-07-18' AND NOT cached").fetchall()
        assert rows and all(cost == pytest.approx(PriceTable().cost("gpt-4o-mini", Usage(
            prompt_tokens=p, completion_tokens=c, cached_tokens=k))) for p, c, k, cost in rows)
        estimate = run(runner, tmp_path, *models, "--set", "llm.prices.gpt4o-mini={input: 9, output: 9}",
                       "--estimate")
        assert estimate.exit_code == 0 and warned[0] in estimate.stderr.splitlines(), estimate.output
        for key in ("gpt-4o-mini", "openai/gpt-4o-mini", "gpt-4o-mini*"):
            right = run(runner, tmp_path / key.replace("/", "_"), *models, "--set",
                        f"llm.prices.{key}={{input: 9, output: 9}}", "--until", "graph")
            assert right.exit_code == 0 and "prices no model" not in right.output, (key, right.output)


def test_validate_names_a_price_key_that_prices_no_model(runner):
    """``validate --pipeline`` checks a pipeline before any run: a typo in llm.prices passed it
    with no word, to be named only when the run started."""
    typo = runner.invoke(cli, ["validate", "airline", "--pipeline", "intellagent", "--set",
                               "llm.prices.gpt4o-mini={input: 9, output: 9}"])
    assert typo.exit_code == 0, typo.output
    assert "warning: llm.prices key 'gpt4o-mini' prices no model this run calls (its models: mock/schema)" \
        in typo.stderr, typo.stderr
    right = runner.invoke(cli, ["validate", "airline", "--pipeline", "intellagent", "--set",
                                "llm.prices.mock/*={input: 9, output: 9}"])
    assert right.exit_code == 0 and "prices no model" not in right.output, right.output


def test_a_partial_price_is_merged_over_the_librarys(runner, tmp_path, monkeypatch):
    """Only cached_input for a model genai-prices knows was refused (missing required key
    'input'): the run's fields are merged over the library's price of that model."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer(prompt_cache=True) as server:
        result = run(runner, tmp_path, "--model", "gpt-4o-mini", "--set", f"llm.default.base_url={server.base_url}",
                     "--set", "llm.default.api_key_env=TEST_KEY", "--set",
                     "llm.prices.gpt-4o-mini={cached_input: 0.01}", "--budget", "5")
    assert result.exit_code == 0, result.output
    rows = sqlite3.connect(tmp_path / "intellagent.db").execute(
        "SELECT prompt_tokens, cached_tokens, completion_tokens, cost_usd FROM llm_calls WHERE NOT cached").fetchall()
    assert any(cached for _, cached, _, _ in rows)
    for prompt, cached, completion, cost in rows:  # the library's input and output, the run's cached rate
        assert cost == pytest.approx(((prompt - cached) * 0.15 + cached * 0.01 + completion * 0.60) / 1e6)
    tiered = PriceTable({"gemini-2.5-pro": Price(output=20.0)}).price("gemini-2.5-pro")
    assert tiered.rates(250_000) == pytest.approx((2.5, 20.0, 0.25))  # the library's tiers, the run's output


@pytest.mark.parametrize("key,given,missing", [
    ("my-local-model", "{cached_input: 0.1}", "input or output"),
    ("my-*", "{output: 2}", "input"),
])
def test_a_partial_price_with_nothing_to_merge_over_is_refused(runner, tmp_path, monkeypatch, key, given, missing):
    """A model genai-prices does not know takes its whole price from llm.prices: one line naming
    the key, the fields it lacks and the model, before anything runs (and from --estimate)."""
    monkeypatch.setenv("TEST_KEY", "k")
    result = run(runner, tmp_path, *UNPRICED, "--set", f"llm.prices.{key}={given}")
    from tests.test_bad_input import assert_one_clean_line

    assert_one_clean_line(result, f"--set llm.prices.{key}: ", f"llm.prices.{key}: no {missing} price")
    assert "my-local-model" in result.stderr
    assert run(runner, tmp_path, *UNPRICED, "--set", f"llm.prices.{key}={given}", "--estimate").exit_code == 2
