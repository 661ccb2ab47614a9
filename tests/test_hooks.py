"""Every hook has a test of its own (datasette's rule): a plugin implementing the hook, and the
effect a user would see. ``test_every_hook_has_a_test_of_its_own`` fails for a hook added to
the spec without one."""

from __future__ import annotations

import ast
import inspect
import json
import types
from pathlib import Path

import click
from pydantic import BaseModel

from intellagent import hookimpl, hookspecs
from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.executors import LocalExecutor
from intellagent.metrics import Metric, MetricResult
from intellagent.model import StrictModel
from intellagent.report import Reporter
from intellagent.steps import PASS_FAIL, Critic, Output, Sampler, Score, ScoreSpec
from intellagent.testing.harness import run_pipeline
from intellagent.registry import load_registry
from tests.conftest import REPO


def hook_names() -> list[str]:
    return sorted(n for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
                  if hasattr(f, "intellagent_spec"))


def test_every_hook_has_a_test_of_its_own():
    tests: set[str] = set()
    for path in (REPO / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_hook_"):
                tests.add(node.name)
    missing = [name for name in hook_names() if not any(t.startswith(f"test_hook_{name}") for t in tests)]
    assert not missing, f"hooks without a test_hook_<name> test: {missing}"


def plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    module.INTELLAGENT_NAMESPACE = "acme"
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, hookimpl(fn))
    return module


# -- a tiny pipeline of the test's own: a sampler of coins, a critic scoring each -------------

class Coin(BaseModel):
    id: str
    heads: bool


class CoinSampler(Sampler):
    name = "coins"
    output = list[Coin]

    def run(self, ctx) -> list[Coin]:
        rng = ctx.rng("coins")
        return [Coin(id=f"C{i}", heads=rng.random() < 0.5) for i in range(6)]


class CoinCriticConfig(StrictModel):
    explode_on: str | None = None


class CoinCritic(Critic):
    name = "judge-coin"
    Config = CoinCriticConfig
    inputs = {"coin": Coin}
    output = Coin
    statuses = PASS_FAIL
    scores = {"coin": ScoreSpec(statuses=PASS_FAIL)}

    def run(self, ctx, coin: Coin) -> Output[Coin]:
        if coin.id == self.config.explode_on:
            raise RuntimeError("critic bug")
        status = "pass" if coin.heads else "fail"
        return Output(value=coin, status=status, scores=[Score(name="coin", status=status)])


def stages(register):
    register(CoinSampler)
    register(CoinCritic)


PIPELINE = {"steps": {"coins": {"use": "acme/coins"}, "judged": {"use": "acme/judge-coin", "each": "coins"}},
            "metrics": {"heads": {"use": "rate", "with": {"score": "coin"}}}, "report": ["json"]}


def run_coins(shop: Path, *plugins, pipeline: dict | None = None, **kw):
    registry = load_registry(plugins=[plugin("coinstages", register_stages=stages), *plugins])
    return run_pipeline(pipeline or PIPELINE, load_environment(shop), registry=registry,
                        hooks=registry.pm, **kw)


# -- registration hooks ------------------------------------------------------------------------

def test_hook_register_environments(runner, shop):
    envs = plugin("envs", register_environments=lambda register: register("myshop", shop))
    result = runner.invoke(cli, ["validate", "acme/myshop"], obj={"plugins": (envs,)})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: shop 0.1.0")


def test_hook_register_stages(shop, tmp_path):
    result = run_coins(shop, workspace=tmp_path)
    statuses = [i.status for i in result.data.items("judged")]
    assert len(statuses) == 6 and set(statuses) <= {"pass", "fail"}


def test_hook_register_reporters(shop, tmp_path):
    class Tally(Reporter):
        name = "tally"

        def write(self, report, data, folder, views):
            path = folder / "tally.txt"
            path.write_text(" ".join(i.status for i in data.items("judged")))
            return path

    extra = plugin("tally", register_reporters=lambda register: register(Tally))
    result = run_coins(shop, extra, workspace=tmp_path, pipeline={**PIPELINE, "report": ["acme/tally"]})
    [path] = result.paths
    assert path.name == "tally.txt" and len(path.read_text().split()) == 6


def test_hook_register_reporters_through_register_stages_still_works_with_a_warning(shop, tmp_path):
    class Old(Reporter):
        name = "old"

        def write(self, report, data, folder, views):
            (folder / "old.txt").write_text("x")
            return folder / "old.txt"

    extra = plugin("old", register_stages=lambda register: register(Old))
    registry = load_registry(plugins=[extra])
    assert registry.resolve("reporter", "acme/old").value is Old
    assert any("register_reporters" in line for line in registry.deprecations)


def test_hook_register_pipelines(runner, shop, tmp_path):
    path = tmp_path / "coins.yaml"
    path.write_text(json.dumps(PIPELINE))
    flows = plugin("flows", register_pipelines=lambda register: register("coins", path),
                   register_stages=stages)
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", "acme/coins", "--workspace",
                                 str(tmp_path / "ws")], obj={"plugins": (flows,)})
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run ") and "6 items" in result.stdout


def test_hook_register_metrics(shop, tmp_path):
    class Heads(Metric):
        name = "heads-count"

        def compute(self, data):
            heads = sum(1 for _, s in data.scores("coin") if s.status == "pass")
            return MetricResult(name=self.name, title="heads", values={"heads": heads})

    extra = plugin("m", register_metrics=lambda register: register("heads-count", Heads))
    result = run_coins(shop, extra, workspace=tmp_path,
                       pipeline={**PIPELINE, "metrics": ["acme/heads-count", {"use": "rate", "with": {"score": "coin"}}]})
    counted = result.report.metrics["heads-count"].values["heads"]
    assert counted == sum(1 for i in result.data.items("judged") if i.status == "pass")


def test_hook_register_views(shop, tmp_path):
    class CoinView:
        artefact = Coin

        @staticmethod
        def html(coin, item=None):
            return f"<p class=coin>{'HEADS' if coin.heads else 'TAILS'}</p>"

    extra = plugin("v", register_views=lambda register: register("coin", CoinView))
    result = run_coins(shop, extra, workspace=tmp_path, pipeline={**PIPELINE, "report": ["html"]})
    page = result.paths[0].read_text()
    assert page.count("<p class=coin>") >= 6


def test_hook_register_agents(shop, tmp_path):
    from intellagent.agent import Agent, AgentTurn

    class Parrot(Agent):
        async def step(self, messages, tools):
            return AgentTurn(content="PARROT: " + messages[-1]["content"])

    agents = plugin("a", register_agents=lambda register: register("parrot", Parrot))
    registry = load_registry(plugins=[agents])
    assert registry.resolve("agent", "parrot").value is Parrot
    pipeline = {"agent": {"use": "acme/parrot"}, "llm": {"default": {"model": "mock/schema"}},
                "steps": {"scenarios": {"use": "hook-scenarios"},
                          "dialogs": {"use": "user-agent", "each": "scenarios", "with": {"max_turns": 1}}},
                "report": []}
    scenarios = plugin("s", register_stages=lambda register: register(_scenario_sampler()))
    registry = load_registry(plugins=[agents, scenarios])
    result = run_pipeline(pipeline, load_environment(shop), registry=registry, workspace=tmp_path)
    [dialog] = [v for _, v in result.data.values("dialogs")]
    replies = [t.content for t in dialog.turns if t.role == "assistant"]
    assert replies and replies[0].startswith("PARROT: ")


def _scenario_sampler():
    from intellagent_plugins.dialogue.scenario import Scenario

    class Scenarios(Sampler):
        name = "hook-scenarios"
        output = list[Scenario]

        def run(self, ctx):
            return [Scenario(id="S1", brief="Ask for your credit.")]

    return Scenarios


def test_hook_register_llm_providers(shop, tmp_path):
    asked: list[str] = []

    class Echo:
        name = "echo"

        def __init__(self, settings, *, seed=0):
            self.settings = settings

        async def chat(self, request):
            from intellagent.llm.types import ChatReply
            asked.append(request.messages[-1]["content"])
            return ChatReply(content="echo")

        async def structured(self, request, response_model):
            raise NotImplementedError

        async def aclose(self):
            pass

    from intellagent.llm import LLM
    from intellagent.pipeline import LLMSettings, ModelSettings

    providers = plugin("p", register_llm_providers=lambda register: register("echo", Echo))
    registry = load_registry(plugins=[providers])
    llm = LLM(LLMSettings(default=ModelSettings(model="anything", provider="acme/echo")), registry=registry)

    import asyncio
    outcome = asyncio.run(llm.chat([{"role": "user", "content": "hi"}]))
    assert outcome.ok and outcome.value.content == "echo" and asked == ["hi"]


def test_hook_register_executors(shop, tmp_path):
    mapped: list[int] = []

    class Counting(LocalExecutor):
        name = "counting"

        async def map(self, work, items, *, limit, key=None):
            items = list(items)
            mapped.append(len(items))
            await super().map(work, items, limit=limit, key=key)

    extra = plugin("x", register_executors=lambda register: register("counting", Counting))
    result = run_coins(shop, extra, workspace=tmp_path, pipeline={**PIPELINE, "executor": {"use": "acme/counting"}})
    assert mapped == [6] and len(list(result.data.items("judged"))) == 6


def test_hook_register_env_templates(runner, tmp_path):
    template = tmp_path / "tpl"
    template.mkdir()
    (template / "README.md.jinja").write_text("# {{ name }}\n")
    extra = plugin("t", register_env_templates=lambda register: register("tiny", template))
    result = runner.invoke(cli, ["new-env", "kiosk", "--template", "acme/tiny", "--dir", str(tmp_path / "out")],
                           obj={"plugins": (extra,)})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "kiosk" / "README.md").read_text().startswith("# kiosk")


def test_hook_register_commands(runner):
    @click.command("hello")
    def hello() -> None:
        click.echo("hello from a plugin")

    extra = plugin("c", register_commands=lambda register: register(hello))
    result = runner.invoke(cli, ["hello"], obj={"plugins": (extra,)})
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"


# -- observer hooks ----------------------------------------------------------------------------

def observer(seen: list):
    def record(name):
        def fn(**kwargs):
            seen.append((name, kwargs))
        return fn
    hooks = {}
    for name, args in (("before_run", "run"), ("after_run", "run, report"),
                       ("on_run_error", "run, error"), ("before_step", "run, step"),
                       ("after_step", "run, step, summary"), ("on_step_error", "run, step, error")):
        namespace: dict = {"record": record(name)}
        exec(f"def {name}({args}):\n    record({', '.join(f'{a}={a}' for a in args.split(', '))})", namespace)
        hooks[name] = namespace[name]
    return plugin("observer", **hooks)


def test_hook_before_run(shop, tmp_path):
    seen: list = []
    result = run_coins(shop, observer(seen), workspace=tmp_path)
    name, args = seen[0]
    assert name == "before_run"
    assert args["run"].run_id == result.run_id and args["run"].env.name == "shop"


def test_hook_after_run(shop, tmp_path):
    seen: list = []
    result = run_coins(shop, observer(seen), workspace=tmp_path)
    name, args = seen[-1]
    assert name == "after_run" and args["report"] is result.report
    assert sum(args["report"].outcomes.values()) == 6


def test_hook_before_step(shop, tmp_path):
    seen: list = []
    run_coins(shop, observer(seen), workspace=tmp_path)
    assert [(a["step"].name, a["step"].kind) for n, a in seen if n == "before_step"] == [
        ("coins", "sampler"), ("judged", "critic")]


def test_hook_after_step(shop, tmp_path):
    seen: list = []
    result = run_coins(shop, observer(seen), workspace=tmp_path)
    after = {a["step"].name: a["summary"] for n, a in seen if n == "after_step"}
    failed = sum(1 for i in result.data.items("judged") if i.status == "fail")
    assert after == {"coins": {"items": 1, "not_ok": 0}, "judged": {"items": 6, "not_ok": failed}}


def test_hook_on_step_error(shop, tmp_path):
    seen: list = []
    pipeline = {**PIPELINE, "steps": {**PIPELINE["steps"], "explode": {"use": "acme/judge-coin", "each": "coins",
                                                                "with": {"explode_on": "C5"}}}}
    try:
        run_coins(shop, observer(seen), workspace=tmp_path, pipeline=pipeline)
    except RuntimeError:
        pass
    errors = [(a["step"].name, str(a["error"])) for n, a in seen if n == "on_step_error"]
    assert errors == [("explode", "critic bug")]


def test_hook_on_run_error(shop, tmp_path):
    seen: list = []
    pipeline = {**PIPELINE, "steps": {**PIPELINE["steps"], "explode": {"use": "acme/judge-coin", "each": "coins",
                                                                "with": {"explode_on": "C5"}}}}
    try:
        run_coins(shop, observer(seen), workspace=tmp_path, pipeline=pipeline)
    except RuntimeError:
        pass
    assert [type(a["error"]).__name__ for n, a in seen if n == "on_run_error"] == ["RuntimeError"]
    assert not any(n == "after_run" for n, _ in seen)


# -- observer hooks inside an item ---------------------------------------------------------------

def tool_agent(messages, tools):
    if messages[-1]["role"] == "tool":
        return "done"
    return {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "c1"}}]}


def dialog_run(shop, tmp_path, seen):
    observer = types.ModuleType("inside")
    for name in ("before_item", "after_item", "after_model_call", "after_agent_turn", "after_tool_call"):
        args = {"before_item": "run, step, item", "after_item": "run, step, item, status, made",
                "after_model_call": "run, step, item, call", "after_agent_turn": "run, step, item, turn",
                "after_tool_call": "run, step, item, call"}[name]
        namespace: dict = {"seen": seen}
        exec(f"def {name}({args}):\n    seen.append(({name!r}, dict({', '.join(f'{a}={a}' for a in args.split(', '))})))",
             namespace)
        setattr(observer, name, hookimpl(namespace[name]))
    scenarios = plugin("s", register_stages=lambda register: register(_scenario_sampler()))
    registry = load_registry(plugins=[scenarios, observer])
    pipeline = {"agent": {"use": "python", "with": {"callable": "tests.test_hooks:tool_agent"}},
                "llm": {"default": {"model": "mock/schema"}},
                "steps": {"scenarios": {"use": "hook-scenarios"},
                          "dialogs": {"use": "user-agent", "each": "scenarios", "with": {"max_turns": 1}}},
                "report": []}
    return run_pipeline(pipeline, load_environment(shop), registry=registry, workspace=tmp_path,
                        hooks=registry.pm)


def test_hook_before_item(shop, tmp_path):
    seen: list = []
    dialog_run(shop, tmp_path, seen)
    started = [(a["step"].name, a["item"]) for n, a in seen if n == "before_item"]
    assert started == [("scenarios", ""), ("dialogs", "S1")]


def test_hook_after_item(shop, tmp_path):
    seen: list = []
    dialog_run(shop, tmp_path, seen)
    done = [(a["step"].name, a["item"], a["status"], a["made"]) for n, a in seen if n == "after_item"]
    assert done == [("scenarios", "", "ok", True), ("dialogs", "S1", "ok", True)]
    again: list = []
    dialog_run(shop, tmp_path, again)  # the same run again: the sampler's item is reused
    assert ("scenarios", "", "ok", False) in [(a["step"].name, a["item"], a["status"], a["made"])
                                              for n, a in again if n == "after_item"]


def test_hook_after_model_call(shop, tmp_path):
    seen: list = []
    dialog_run(shop, tmp_path, seen)
    calls = [a["call"] for n, a in seen if n == "after_model_call"]
    assert calls and {c.role for c in calls} == {"user"} and {c.stage for c in calls} == {"dialogs"}
    assert all(c.outcome == "ok" and c.model == "mock/schema" and c.started > 0 for c in calls)
    # the item each call was made for, as before_item named it
    assert {(a["step"].name, a["item"]) for n, a in seen if n == "after_model_call"} == {("dialogs", "S1")}


def test_hook_after_agent_turn(shop, tmp_path):
    seen: list = []
    dialog_run(shop, tmp_path, seen)
    turns = [(a["item"], a["turn"]) for n, a in seen if n == "after_agent_turn"]
    assert [t.tool_calls for _, t in turns] == [1, 0] and {i for i, _ in turns} == {"S1"}
    assert all(t.error is None and t.seconds >= 0 for _, t in turns)


def test_hook_after_tool_call(shop, tmp_path):
    seen: list = []
    dialog_run(shop, tmp_path, seen)
    calls = [(a["step"].name, a["call"]) for n, a in seen if n == "after_tool_call"]
    assert [(s, c.name, c.error) for s, c in calls] == [("dialogs", "get_customer", False)]
