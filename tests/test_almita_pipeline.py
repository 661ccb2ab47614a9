"""The ALMITA pipeline end to end, offline: on mock/schema (the rules discard what it makes, and
the funnel says so), on a mock/function script that writes valid graphs (conversations and tests
get through, with metrics known in advance), with a team's own procedures or intents, with an
agent that records what it was given; and its sampler and test cutter."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
from pathlib import Path

import networkx as nx
import pytest
from ruamel.yaml import YAML

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.harness import run_step
from intellagent_plugins.almita.artefacts import (Conversation, ConversationGraph, ConversationNode, GraphEdge,
                                                  Message, Procedure)
from intellagent_plugins.almita.extractors import AlmitaNoise, NoiseConfig
from intellagent_plugins.almita.generators import cut_tests
from intellagent_plugins.almita.rules import check_conversation_graph
from intellagent_plugins.providers.mock import FunctionModel
from tests.almita_script import answer
from tests.test_almita_rules import APIS, GRAPH
from intellagent_plugins.almita.sampling import coverage, inverse_visit_paths, uniform_paths
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

SCRIPT = "tests.almita_script:answer"  # a module name: the runs do not depend on where the checkout is
FUNCTION = ["--model", "mock/function", "--set", f"llm.default.options.function={SCRIPT}"]


def run(runner, tmp_path: Path, *args: str, exit_code: int = 0) -> dict:
    result = runner.invoke(cli, ["run", *args, "--pipeline", "almita", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == exit_code, result.output
    report = sorted((tmp_path / "ws" / "runs").glob("*/report.json"))[-1]
    return read_report(report)


def funnel(report: dict) -> dict[str, dict]:
    return {row["stage"]: row for row in report["metrics"]["funnel"]["rows"]}


def seven(report: dict) -> dict[str, float | None]:
    return report["metrics"]["almita"]["values"]


def test_on_mock_schema_the_funnel_names_the_rules_that_removed_what_it_made(runner, tmp_path):
    report = run(runner, tmp_path, "almita", "--paths", "2")
    rows = funnel(report)
    assert rows["intents"]["generated"] == 4 and rows["procedures"]["kept"] == 4  # the environment's, APIs given
    flow = rows["flowgraphs"]
    assert flow["generated"] == 4 and flow["removed"] == 4 and flow["kept"] == 0
    rule, count = flow["by_rule"].split()
    assert rule in ("unique-ids", "known-endpoints", "node-types") and int(count) == 4
    assert rows["tests"]["generated"] == 0
    assert set(seven(report)) == {"reply_recall", "correct_reply", "api_recall", "correct_api",
                                  "correct_parameters", "test", "conversation", "conversations_left_out",
                                  "reply_right", "api_right", "call_right"}
    listed = report["metrics"]["rejected"]["rows"]
    assert len(listed) == 4 and all(r["why"].startswith(f"rule {rule}:") for r in listed)
    html = next((tmp_path / "ws" / "runs").glob("*/report.html")).read_text()
    assert "Funnel" in html and f"rule {rule}" in html


def test_a_script_that_writes_valid_graphs_gets_conversations_and_tests_through(runner, tmp_path):
    report = run(runner, tmp_path, "almita", *FUNCTION, "--paths", "3")
    rows = funnel(report)
    for stage in ("flowgraphs", "conversation graphs", "noisy graphs"):
        assert rows[stage]["kept"] == 4 and rows[stage]["removed"] == 0
    assert rows["conversations"]["kept"] == rows["conversations"]["generated"] >= 8
    tests = rows["tests"]["kept"]
    assert tests > rows["conversations"]["kept"]
    # the scripted agent always asks for the order id: every reply test recalled, no API call made
    values = seven(report)
    assert values["reply_recall"] == 1.0 and values["api_recall"] == 0.0
    # no API was called: correct API and its parameters have nothing to judge; of all API tests, none
    assert values["correct_api"] is None and values["correct_parameters"] is None
    assert values["api_right"] == values["call_right"] == 0.0
    assert values["conversation"] == 0.0  # every conversation has an API test
    by_intent = {r["intent"]: r for r in report["metrics"]["almita"]["rows"]}
    assert set(by_intent) == {"all", "order-not-received", "change-delivery-address", "damaged-item", "refund-status"}
    assert sum(r["tests"] for i, r in by_intent.items() if i != "all") == tests == by_intent["all"]["tests"]


def test_tests_are_cut_after_user_messages_and_api_outputs():
    procedure = Procedure(id="P1", intent="lost", intent_name="lost", text="t")
    messages = [Message(role="assistant", text="Hi! How can I help?"),
                Message(role="user", text="My order LH-1002 never came."),
                Message(role="api", api="get_order", arguments={"order_id": "LH-1002"}, output='{"status": "shipped"}'),
                Message(role="api", api="track_shipment", arguments={"order_id": "LH-1002"}, output="lost"),
                Message(role="assistant", text="It was lost. Shall I refund it?"),
                Message(role="user", text="What's the weather?", noise="off-topic"),
                Message(role="assistant", text="I can only help with orders. Shall I refund it?")]
    tests = cut_tests(Conversation(id="lost/P1/C01", procedure=procedure, messages=messages))
    assert [t.expected.kind for t in tests] == ["api", "api", "reply", "reply"]
    assert [t.expected.api for t in tests[:2]] == ["get_order", "track_shipment"]
    assert tests[0].expected.arguments == {"order_id": "LH-1002"}
    assert [len(t.context) for t in tests] == [2, 4, 6, 8]
    second = tests[1].context
    assert second[2]["tool_calls"][0]["function"] == {"name": "get_order", "arguments": '{"order_id": "LH-1002"}'}
    assert second[3] == {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'}
    assert [t.after_noise for t in tests] == [False, False, False, True]
    assert {t.conversation for t in tests} == {"lost/P1/C01"} and tests[0].procedure == "lost/P1"


AGENT = '''
import json, os

def agent(messages, tools):
    with open(os.environ["ALMITA_AGENT_LOG"], "a") as fh:
        fh.write(json.dumps({"messages": messages, "tools": tools}) + "\\n")
    return {"content": None, "tool_calls": [{"name": "get_order", "arguments": {"order_id": "LH-1002"}}]}
'''


def test_the_agent_gets_the_context_and_the_procedures_apis_and_nothing_runs(runner, tmp_path, monkeypatch):
    (tmp_path / "agent.py").write_text(AGENT)
    log = tmp_path / "agent.log"
    monkeypatch.setenv("ALMITA_AGENT_LOG", str(log))
    monkeypatch.chdir(tmp_path)
    report = run(runner, tmp_path, "almita", *FUNCTION, "--paths", "1", "--agent", "python",
                 "--set", "agent.with.callable=agent.py:agent")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == funnel(report)["tests"]["kept"] > 0
    procedures = {p.stem: p.read_text() for p in (REPO / "plugins/almita/environment/procedures").glob("*.md")}
    for call in calls:
        system = call["messages"][0]
        assert system["role"] == "system" and "Larkspur Home" in system["content"]
        name = next(n for n, text in procedures.items() if text.split("---", 2)[2].strip() in system["content"])
        declared = YAML(typ="safe").load(procedures[name].split("---")[1])["apis"]
        assert [t["function"]["name"] for t in call["tools"]] == declared
        assert call["messages"][-1]["role"] in ("user", "tool")
    values = seven(report)
    assert values["reply_recall"] == values["reply_right"] == 0.0  # it always calls get_order
    assert values["correct_reply"] is None  # never replied: nothing to judge
    # correct API is the share of API tests that expect get_order, whichever paths were drawn
    expected = [t["expected"] for i in report["items"] if i["step"] == "tests" for t in i["value"]]
    api = [e for e in expected if e["kind"] == "api"]
    assert api and values["api_recall"] == 1.0
    assert values["correct_api"] == pytest.approx(sum(e["api"] == "get_order" for e in api) / len(api), abs=1e-3)
    # correct API parameters: of the tests where it called the expected API (get_order)
    get_order = [e for e in api if e["api"] == "get_order"]
    assert values["correct_parameters"] == pytest.approx(
        sum(e["arguments"] == {"order_id": "LH-1002"} for e in get_order) / len(get_order), abs=1e-3)
    assert values["call_right"] == pytest.approx(
        sum(e["arguments"] == {"order_id": "LH-1002"} for e in get_order) / len(api), abs=1e-3)


FAILING_MODEL = '''
def agent(request, response_model):
    messages = request.messages
    if "Procedure: refund status" in messages[0]["content"]:
        raise RuntimeError("the agent's model is down")
    if messages[-1]["role"] == "tool" and "not found" in messages[-1]["content"]:
        raise RuntimeError("the agent's model timed out")
    return "Could you please tell me your order id?"
'''


def test_conversations_with_a_test_not_scored_are_left_out_and_counted(runner, tmp_path, monkeypatch):
    (tmp_path / "failing.py").write_text(FAILING_MODEL)
    monkeypatch.chdir(tmp_path)
    report = run(runner, tmp_path, "almita", *FUNCTION, "--paths", "3", "--set", "llm.roles.agent.model=mock/function",
                 "--set", "llm.roles.agent.options.function=failing.py:agent",
                 exit_code=3)  # items left with infra errors: the run could not finish
    runs = {i["item"]: i["status"] for i in report["items"] if i["step"] == "runs"}
    tests = {i["item"]: [f"{i['item']}/{t['id']}" for t in i["value"]] for i in report["items"] if i["step"] == "tests"}
    unfinished = {c for c, ids in tests.items() if any(runs[t] == "infra-error" for t in ids)}
    untouched = {c for c, ids in tests.items() if all(runs[t] == "infra-error" for t in ids)}
    assert unfinished - untouched and untouched  # some partly, some wholly unscored
    assert all(runs[t] == "infra-error" for c in untouched for t in tests[c] if c.startswith("refund-status/"))
    rows = {r["intent"]: r for r in report["metrics"]["almita"]["rows"]}
    assert rows["all"]["conversation"]["n"] == len(tests) - len(unfinished)
    assert rows["all"]["left_out"] == report["metrics"]["almita"]["values"]["conversations_left_out"] == len(unfinished)
    assert rows["refund-status"]["tests"] == 0 and rows["refund-status"]["left_out"] == sum(
        c.startswith("refund-status/") for c in tests)
    # the infra errors are not failures: every test that was scored is counted, no other
    assert rows["all"]["tests"] == rows["all"]["test"]["n"] == sum(s == "ok" for s in runs.values())
    assert f"{len(unfinished)} conversations left out" in report["metrics"]["almita"]["headline"]


TEAM_PROCEDURE = """---
intent: Cancel a subscription
apis: [find_subscription, cancel_subscription]
---
# Cancel a subscription
1. Ask for the customer's email and find the subscription with find_subscription.
2. If it is active, confirm and cancel it with cancel_subscription.
"""

TEAM_APIS = """apis:
  - name: find_subscription
    description: Find a customer's subscription by email.
    parameters: {type: object, properties: {email: {type: string}}, required: [email]}
    output: The subscription, or not found.
  - name: cancel_subscription
    description: Cancel a subscription.
    parameters: {type: object, properties: {subscription_id: {type: string}}, required: [subscription_id]}
    output: Cancelled.
"""


def test_a_team_feeds_its_own_procedures(runner, tmp_path):
    folder = tmp_path / "procs"
    folder.mkdir()
    (folder / "cancel.md").write_text(TEAM_PROCEDURE)
    (folder / "apis.yaml").write_text(TEAM_APIS)
    report = run(runner, tmp_path, "education", *FUNCTION, "--procedures", str(folder), "--paths", "2")
    rows = funnel(report)
    assert rows["intents"]["generated"] == 1 and rows["procedures"]["kept"] == 1
    assert rows["tests"]["kept"] > 0
    by_intent = [r["intent"] for r in report["metrics"]["almita"]["rows"]]
    assert by_intent == ["all", "cancel-a-subscription"]


def test_given_intents_get_generated_procedures(runner, tmp_path):
    (tmp_path / "intents.txt").write_text("# our intents\n- late delivery: the parcel is late\n- broken item\n")
    report = run(runner, tmp_path, "education", *FUNCTION, "--intents", str(tmp_path / "intents.txt"),
                 "--paths", "1")
    rows = funnel(report)
    assert rows["intents"]["generated"] == 2
    assert rows["procedures"]["generated"] == 4  # per_intent: 2, as in the paper
    assert rows["tests"]["kept"] > 0


def test_bad_procedure_input_is_one_line_and_exit_2(runner, tmp_path):
    result = runner.invoke(cli, ["run", "almita", "--pipeline", "almita", "--workspace", str(tmp_path / "ws"),
                                 "--procedures", str(tmp_path / "missing")])
    assert result.exit_code == 2 and f"--procedures: steps.intents.with.procedures: procedures folder " \
        f"'{tmp_path / 'missing'}' not found" in result.output
    folder = tmp_path / "procs"
    folder.mkdir()
    (folder / "x.md").write_text("---\napis: [no_such_api]\n---\n# X\n1. Do it.\n")
    result = runner.invoke(cli, ["run", "almita", "--pipeline", "almita", "--workspace", str(tmp_path / "ws"),
                                 "--procedures", str(folder)])
    assert result.exit_code == 2
    assert f"{folder / 'x.md'}:2" in result.output and "no_such_api" in result.output
    assert "Traceback" not in result.output


COUNTING_MODEL = '''
import os
from tests.almita_script import answer as script

def answer(request, response_model):
    with open(os.environ["ALMITA_CALLS"], "a") as fh:
        fh.write("call\\n")
    return script(request, response_model)
'''


@pytest.mark.parametrize("scorer,message", [("nomod:fn", "module 'nomod' failed to import"),
                                            ("tests.almita_script:nothing", "has no 'nothing'"),
                                            ("tests.almita_script:AGENT_REPLY", "is not callable"),
                                            ("tests.almita_script:answer", "needs a threshold")])
def test_a_bad_scorer_is_refused_before_any_model_call(runner, tmp_path, monkeypatch, scorer, message):
    (tmp_path / "counting.py").write_text(COUNTING_MODEL)
    monkeypatch.setenv("ALMITA_CALLS", str(tmp_path / "calls.log"))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli, ["run", "almita", "--pipeline", "almita", "--workspace", str(tmp_path / "ws"),
                                 "--model", "mock/function", "--set", "llm.default.options.function=counting.py:answer",
                                 "--set", f"steps.verdicts.with.scorer={scorer}", "--paths", "1"])
    assert result.exit_code == 2 and "scorer" in result.output and message in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "calls.log").exists()  # refused before the first model call
    pipeline = (REPO / "plugins/almita/pipeline.yaml").read_text().replace("scorer: chrf", f"scorer: '{scorer}'")
    (tmp_path / "pipeline.yaml").write_text(pipeline)
    result = runner.invoke(cli, ["validate", "almita", "--pipeline", str(tmp_path / "pipeline.yaml")])
    assert result.exit_code == 2 and message in result.output and "pipeline.yaml" in result.output, result.output
    # a scorer of your own with its threshold is fine
    good = pipeline.replace(f"scorer: '{scorer}'", "scorer: 'tests.almita_script:answer', threshold: 0.5")
    (tmp_path / "pipeline.yaml").write_text(good)
    assert runner.invoke(cli, ["validate", "almita", "--pipeline", str(tmp_path / "pipeline.yaml")]).exit_code == 0


# --- the sampler --------------------------------------------------------------------------------


def test_inverse_visit_draws_children_in_proportion_to_one_over_visits_plus_one():
    g = nx.MultiDiGraph([("r", "a"), ("r", "b")])
    differs = 0
    trials = 3000
    for seed in range(trials):
        first, second = inverse_visit_paths(g, "r", 2, random.Random(seed))
        differs += first[1][0][1] != second[1][0][1]
    assert differs / trials == pytest.approx(2 / 3, abs=0.03)  # weights 1/2 (visited once) vs 1/1


@pytest.mark.parametrize("sampler", [inverse_visit_paths, uniform_paths])
def test_parallel_edges_do_not_multiply_a_childs_weight(sampler):
    g = nx.MultiDiGraph([("r", "b"), ("r", "b"), ("r", "c")])  # two outputs lead to b, one to c
    trials = 4000
    b = sum(sampler(g, "r", 1, random.Random(seed))[0][1][0][1] == "b" for seed in range(trials))
    assert b / trials == pytest.approx(0.5, abs=0.025)  # two unvisited children: 1/1 against 1/1


def test_inverse_visit_takes_the_edge_not_yet_walked_to_a_child_more_often():
    g = nx.MultiDiGraph([("r", "b"), ("r", "b")])
    trials = 3000
    other = 0
    for seed in range(trials):
        first, second = inverse_visit_paths(g, "r", 2, random.Random(seed))
        other += first[1] != second[1]
    assert other / trials == pytest.approx(2 / 3, abs=0.03)  # edge weights 1/2 (walked once) vs 1/1
    # the uniform walk draws the edge to a child uniformly
    other = sum(len(set(map(str, uniform_paths(g, "r", 2, random.Random(seed))))) == 2 for seed in range(trials))
    assert other / trials == pytest.approx(1 / 2, abs=0.03)


def tree(branching: int, depth: int) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    g.add_node("r")
    frontier = ["r"]
    for _ in range(depth):
        children = [(n, f"{n}.{i}") for n in frontier for i in range(branching)]
        g.add_edges_from(children)
        frontier = [child for _, child in children]
    return g


def test_inverse_visit_covers_more_than_a_uniform_walk_for_the_same_number_of_paths():
    g = tree(3, 3)  # 40 nodes, 27 leaves; 10 paths each
    inverse, uniform = [], []
    for seed in range(50):
        inverse.append(coverage(g, inverse_visit_paths(g, "r", 10, random.Random(seed))))
        uniform.append(coverage(g, uniform_paths(g, "r", 10, random.Random(seed))))
    for i in (0, 1):  # nodes, edges: measured 0.51 against 0.47 (bench/almita_coverage.py)
        assert statistics.mean(c[i] for c in inverse) > statistics.mean(c[i] for c in uniform) + 0.02


# --- noise --------------------------------------------------------------------------------------


def _noise_llm():
    model = FunctionModel(answer)
    return LLM(LLMSettings(default=ModelSettings(model="fake")), providers={"fake": model}), model


@pytest.mark.parametrize("probability", [0.0, 0.3, 1.0])
def test_noise_follows_assistant_nodes_with_its_probability(probability):
    graph = ConversationGraph(procedure=Procedure(id="P1", intent="x", intent_name="x", text="t"),
                              nodes=[ConversationNode(**n) for n in GRAPH["nodes"]],
                              edges=[GraphEdge(**e) for e in GRAPH["edges"]])
    assistants = sum(n.role == "assistant" for n in graph.nodes)
    env = load_environment(REPO / "plugins/almita/environment")
    step = AlmitaNoise(NoiseConfig(probability=probability, attack_share=0.5))
    inserted, attacks, calls = 0, 0, 0
    for seed in range(40):
        llm, model = _noise_llm()
        out = asyncio.run(run_step(step, env, llm=llm, seed=seed, graph=graph))
        noisy = out.value
        assert check_conversation_graph(noisy.nodes, noisy.edges, APIS) == []
        inserted += noisy.noise_inserted
        attacks += sum(n.noise == "attack" and n.role == "user" for n in noisy.nodes)
        calls += len(model.history)
    share = inserted / (40 * assistants)
    assert share == pytest.approx(probability, abs=0.08)
    if probability == 0.0:
        assert calls == 0  # nothing to write, no model call
    else:
        assert attacks / inserted == pytest.approx(0.5, abs=0.15)
