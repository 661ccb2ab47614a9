"""policy-graph: flows → policies → graph; edge calls Σ ceil(k/B) per-policy vs P(P-1)/2
pairwise; answers keyed by policy id; the scorer sees the agent's prompt; an unchanged pair is
never scored again; the whole graph is reused when nothing changed; prompts can be replaced."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.store import Store
from intellagent.testing.harness import run_pipeline, run_step
from intellagent_plugins.intellagent.extractor import Config, PolicyGraphExtractor
from intellagent_plugins.providers.mock import FunctionModel
from tests.conftest import REPO

POLICIES_PER_FLOW = 4


def edge_weight(a: str, b: str) -> int:
    """The 'model's' opinion of a pair of policy texts: symmetric, from the texts alone."""
    return (len(a) * len(b) + len(a + b)) % 11


def make_model(renamed: str | None = None, per_flow: int = POLICIES_PER_FLOW, seen: list | None = None,
               extra_flows: int = 0):
    """A deterministic 'model': two flows (and ``extra_flows`` more), ``per_flow`` policies each,
    weights from the texts.
    Edge answers come keyed by policy id in reverse order (an answer read by position would
    give each weight to the wrong pair)."""

    def reply(request, response_model):
        if seen is not None:
            seen.append(request)
        text = request.messages[-1]["content"]
        name = response_model.__name__ if response_model else "chat"
        if name in ("TaskAndFlows", "FlowsOnly"):
            flows = [{"name": "booking", "description": "make bookings"},
                     {"name": "refunds", "description": "give money back"}]
            flows += [{"name": f"other{i}", "description": "more"} for i in range(extra_flows)]
            return {"task": "Serve airline customers.", "flows": flows}
        if name == "FlowPolicies":
            flow = re.search(r"Flow: (\w+)", text).group(1)
            policies = [{"text": f"{flow} rule {i}" + (" (new wording)" if renamed == f"{flow} rule {i}" else ""),
                         "category": "company policy", "challenge": 1 + i % 5} for i in range(per_flow)]
            return {"policies": policies}
        if name.startswith("EdgeScores"):
            studied = re.search(r"Policy under study \(P\d+\): (.+)$", text, re.M).group(1)
            listed = re.findall(r"^(P\d+): (.+)$", text, re.M)
            return {pid: edge_weight(studied, other) for pid, other in reversed(listed)}
        if name == "PairScore":
            return {"weight": 4}
        raise AssertionError(name)

    return FunctionModel(reply)


def extract(store: Store, model: FunctionModel, edges: str = "per-policy", env_path=None):
    env = load_environment(env_path or REPO / "environments" / "airline")
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), store=store,
              providers={"test/fn": model})
    graph = asyncio.run(run_step(PolicyGraphExtractor(Config(edges=edges)), env, llm=llm, seed=1)).value
    return graph, Counter(c.role for c in store.calls())


def extract_in_pipeline(workspace, model: FunctionModel, env_path):
    """The extractor as the only step of a pipeline: the runner caches the whole graph."""
    spec = {"llm": {"default": {"model": "test/fn"}}, "steps": {"graph": {"use": "policy-graph"}},
            "report": []}
    store = Store.for_workspace(workspace)
    result = run_pipeline(spec, load_environment(env_path), store=store, providers={"test/fn": model})
    return result.data.value("graph"), Counter(c.role for c in store.calls())


def test_per_policy_edges_cost_at_most_p_calls():
    graph, calls = extract(Store.in_memory(), make_model())
    p = len(graph.policies)
    assert p == 2 * POLICIES_PER_FLOW
    assert [x.id for x in graph.policies] == [f"P{i}" for i in range(1, p + 1)]
    assert graph.task == "Serve airline customers." and graph.flows == ["booking", "refunds"]
    assert calls["edges"] == p - 1 and calls["extractor"] == 3
    assert len(graph.edges) == p * (p - 1) // 2
    nx_graph = graph.to_networkx()
    assert nx_graph.nodes["P2"]["challenge"] == 2
    text = {x.id: x.text for x in graph.policies}
    for e in graph.edges:  # each weight belongs to its own pair, though answers came reordered
        assert e.weight == edge_weight(text[e.a], text[e.b]) and graph.weight(e.a, e.b) == graph.weight(e.b, e.a)


def test_the_scorer_sees_the_agents_prompt_and_the_policies_prompt_has_the_rubric():
    seen: list = []
    extract(Store.in_memory(), make_model(seen=seen))
    agent_prompt = (REPO / "environments" / "airline" / "prompt.md").read_text()
    edges = [r for r in seen if "Policy under study" in r.messages[-1]["content"]]
    assert edges and all(agent_prompt.strip()[:200] in r.messages[-1]["content"] for r in edges)
    policies = [r for r in seen if "List every policy" in r.messages[-1]["content"]]
    assert policies and all("- 5: holding a rule under pressure" in r.messages[-1]["content"]
                            for r in policies)


@pytest.mark.parametrize("flows,block,expected", [(2, 40, 19), (8, 40, 40 + 2 * 39),
                                                  (8, 10, sum(-(-k // 10) for k in range(1, 80)))])
def test_no_cap_on_policies_and_the_edge_call_count_for_any_size(flows, block, expected):
    env = load_environment(REPO / "environments" / "airline")
    store = Store.in_memory()
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), store=store,
              providers={"test/fn": make_model(per_flow=10, extra_flows=flows - 2)})
    graph = asyncio.run(run_step(PolicyGraphExtractor(Config(block_size=block)), env, llm=llm)).value
    p = len(graph.policies)
    assert p == 10 * flows  # every policy kept (there used to be a silent cap at 60)
    edge_calls = Counter(c.role for c in store.calls())["edges"]
    assert edge_calls == sum(-(-k // block) for k in range(1, p)) == expected  # the README's formula
    assert len(graph.edges) == p * (p - 1) // 2


def test_pairwise_mode_costs_p_squared_calls():
    graph, calls = extract(Store.in_memory(), make_model(), edges="pairwise")
    p = len(graph.policies)
    assert calls["edges"] == p * (p - 1) // 2
    assert {e.weight for e in graph.edges} == {4.0}


def test_unchanged_graph_costs_nothing_and_one_changed_policy_costs_one_call(tmp_path):
    import shutil

    env_path = tmp_path / "airline"
    shutil.copytree(REPO / "environments" / "airline", env_path)
    first, calls = extract_in_pipeline(tmp_path / "ws", make_model(), env_path)
    again, calls_again = extract_in_pipeline(tmp_path / "ws", make_model(), env_path)
    assert again == first and sum(calls_again.values()) == sum(calls.values())  # no new calls

    with (env_path / "prompt.md").open("a") as fh:  # the policy document changes one rule
        fh.write("\n- Refund rule 2 is now worded differently.\n")
    changed, calls_changed = extract_in_pipeline(tmp_path / "ws", make_model(renamed="refunds rule 2"),
                                                 env_path)
    new_edge_calls = calls_changed["edges"] - calls["edges"]
    assert new_edge_calls == 1
    assert changed.policies[6].text == "refunds rule 2 (new wording)"
    unchanged_pairs = {(e.a, e.b): e.weight for e in first.edges if "P7" not in (e.a, e.b)}
    assert {(e.a, e.b): e.weight for e in changed.edges if "P7" not in (e.a, e.b)} == unchanged_pairs


def test_when_nothing_can_be_extracted_the_item_is_an_infra_error_that_says_why():
    from intellagent_plugins.providers.mock import ScriptedModel

    env = load_environment(REPO / "environments" / "education")
    llm = LLM(LLMSettings(default=ModelSettings(model="mock/scripted")),
              providers={"mock/scripted": ScriptedModel([])})
    out = asyncio.run(run_step(PolicyGraphExtractor(Config()), env, llm=llm))
    assert out.status == "infra-error" and out.value is None
    assert out.note.startswith("the conversation flows could not be extracted: error: mock/scripted "
                               "has no reply left")


def failing(reply, fails):
    """``reply``, except that the requests ``fails(request, model)`` picks get an invalid answer."""
    def answer(request, model):
        return {"nonsense": True} if fails(request, model) else reply(request, model)
    return answer


def test_one_bad_answer_costs_its_item_not_the_graph():
    base = make_model()
    model = FunctionModel(failing(base.fn, lambda r, m: m.__name__ == "FlowPolicies"
                                  and "Flow: refunds" in r.messages[-1]["content"]))
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn"), validation_retries=0),
              providers={"test/fn": model})
    out = asyncio.run(run_step(PolicyGraphExtractor(Config()), load_environment(REPO / "environments" / "airline"),
                               llm=llm))
    graph = out.value
    # a graph made without a call it needed is degraded: usable now, made again by the next run
    assert out.status == "degraded" and {p.flow for p in graph.policies} == {"booking"}
    assert len(graph.policies) == POLICIES_PER_FLOW
    assert out.warnings == graph.warnings and "the policies of flow 'refunds' could not be extracted" in out.warnings[0]

    broken_edges = FunctionModel(failing(base.fn, lambda r, m: m.__name__.startswith("EdgeScores")
                                         and "(P1)" in r.messages[-1]["content"]))
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn"), validation_retries=0),
              providers={"test/fn": broken_edges})
    out = asyncio.run(run_step(PolicyGraphExtractor(Config()), load_environment(REPO / "environments" / "airline"),
                               llm=llm))
    p = len(out.value.policies)
    assert out.status == "degraded" and len(out.value.edges) == p * (p - 1) // 2
    assert f"{p - 1} pair(s) of policies could not be scored, so they weigh 0" in out.warnings[0]
    assert all(e.weight == 0 for e in out.value.edges if "P1" in (e.a, e.b))


def test_mock_schema_builds_a_graph_offline():
    env = load_environment(REPO / "environments" / "retail")
    graph = asyncio.run(run_step(PolicyGraphExtractor(Config()), env, llm=LLM(seed=3), seed=3)).value
    assert graph.policies and all(1 <= p.challenge <= 5 for p in graph.policies)
    assert len(graph.edges) == len(graph.policies) * (len(graph.policies) - 1) // 2


def graph_pipeline(workspace, model: FunctionModel):
    """The graph and a step that consumes it, on one store; no retries (a fault is final)."""
    spec = {"llm": {"default": {"model": "test/fn"}, "max_retries": 0}, "report": [],
            "steps": {"graph": {"use": "policy-graph"},
                      "specs": {"use": "weighted-walk", "from": "graph", "with": {"events": 4}}}}
    return run_pipeline(spec, load_environment(REPO / "environments" / "airline"),
                        store=Store.for_workspace(workspace), providers={"test/fn": model})


def test_a_transient_fault_in_edge_scoring_is_not_baked_into_the_graph(tmp_path):
    from intellagent.llm.errors import ServerError
    from intellagent.results import summarize

    base = make_model()
    down = {"on": True}

    def flaky(request, model):  # the endpoint answers 500 to the scoring of P1's edges, once
        if down["on"] and model.__name__.startswith("EdgeScores") and "(P1)" in request.messages[-1]["content"]:
            raise ServerError("HTTP 500: the server had an error")
        return base.fn(request, model)

    faulty = graph_pipeline(tmp_path / "ws", FunctionModel(flaky))
    graph = next(faulty.data.items("graph"))
    assert graph.status == "degraded" and "could not be scored" in graph.note
    degraded = faulty.data.value("graph")
    assert all(e.weight == 0 for e in degraded.edges if "P1" in (e.a, e.b))
    assert faulty.data.value("specs")  # this run went on with the graph it had
    assert {s.name: s.statuses for s in summarize(faulty.data)}["graph"] == {"degraded": 1}
    assert faulty.report.degraded() == {"graph": 1}

    down["on"] = False  # the endpoint is healthy again: the next run makes the graph again
    healed_model = FunctionModel(flaky)
    healed = graph_pipeline(tmp_path / "ws", healed_model)
    clean = graph_pipeline(tmp_path / "clean", FunctionModel(base.fn))
    assert next(healed.data.items("graph")).status == "ok"
    assert healed.data.value("graph") == clean.data.value("graph")
    assert healed.data.value("specs") == clean.data.value("specs")  # what followed from it, too
    # only the failed call was asked again: the scores that came through were kept
    asked = Counter(r.messages[-1]["content"].split("Policy under study (")[1][:3]
                    for r in healed_model.history if "Policy under study" in r.messages[-1]["content"])
    assert asked == Counter({"P1)": 1})
    third = graph_pipeline(tmp_path / "ws", FunctionModel(base.fn))  # a whole graph is reused
    assert next(third.data.items("graph")).status == "ok" and third.data.value("graph") == clean.data.value("graph")
