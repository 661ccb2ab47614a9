"""Mutants: faults applied on the harness side around any agent, to see which broken agents a
suite catches. τ-bench with the oracle and drop-writes kills exactly the tasks whose ground truth
changes the database; on a shop whose suite checks the end state and the outputs, each built-in
mutant does what it says to the dialog, and the state check catches every one but the leak."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.agent import AgentTurn
from intellagent.cli import cli
from intellagent.mutants import Mutant
from intellagent.mutation import MutantResult
from intellagent.registry import load_registry
from intellagent.steps import Sampler
from intellagent.store import Store
from tests.conftest import TAU_BENCH
from intellagent_plugins.reporters.writers import read_report

# -- τ-bench: the deterministic check --------------------------------------------------------


@pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")
@pytest.mark.parametrize("domain,split", [("retail", "dev"), ("airline", "test")])
def test_drop_writes_kills_every_tau_task_that_changes_the_database_and_no_other(runner, tmp_path,
                                                                                  domain, split):
    result = runner.invoke(cli, ["mutate", domain, "--pipeline", "tau-bench", "--data", str(TAU_BENCH / domain),
                                 "--tasks", f"tasks_{split}.json", "--agent", "tau-bench/oracle",
                                 "--mutants", "drop-writes", "--workspace", str(tmp_path / "ws"), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    golden = json.loads((TAU_BENCH / domain / f"golden_{split}.json").read_text())["tasks"]
    writes = {f"T{t['task']:03d}-0" for t in golden if not t["db_unchanged"]}
    assert writes and len(writes) < len(golden)  # both kinds of task are there
    assert set(found) == {"drop-writes"}
    assert set(found["drop-writes"]["killed"]) == writes
    assert set(found["drop-writes"]["survived"]) == {f"T{t['task']:03d}-0" for t in golden} - writes
    assert found["drop-writes"]["kill_rate"] == round(len(writes) / len(golden), 4)
    assert found["drop-writes"]["caught_by"] == {"task": len(writes)}


# -- a shop whose suite checks the end state and the outputs ----------------------------------

def shop_agent(messages, tools):
    """Looks the customer up, adds 5 credit, and says whose credit it updated."""
    results = [m for m in messages if m["role"] == "tool"]
    if messages[-1]["role"] == "user":
        if results:
            return "Anything else?"
        return {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "c1"}}]}
    if len(results) == 1:
        return {"tool_calls": [{"name": "add_credit", "arguments": {"customer_id": "c1", "amount": 5}}]}
    name = json.loads(results[0]["content"] or "{}").get("name", "someone") if results[0]["content"] else "someone"
    return f"Done: {name} now has more credit."


def briefs_plugin() -> types.ModuleType:
    from intellagent_plugins.dialogue.scenario import Action, GroundTruth, Scenario

    class Briefs(Sampler):
        name = "briefs"
        output = list[Scenario]

        def run(self, ctx):
            return [Scenario(id="S1", brief="Ask for 5 credit on account c1.", ground_truth=GroundTruth(
                actions=[Action(name="add_credit", arguments={"customer_id": "c1", "amount": 5})],
                outputs=["Ana"]))]

    module = types.ModuleType("briefs")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: register(Briefs))
    return module


PIPELINE = """\
agent: {use: python, with: {callable: "tests.test_mutants:shop_agent", version: "1"}}
llm: {default: {model: mock/schema}}
steps:
  briefs: {use: acme/briefs}
  dialogs: {use: user-agent, each: briefs, with: {max_turns: 1, final_hash: true}}
  verdicts: {use: state-check, each: dialogs, from: briefs}
metrics:
  success: {use: rate, with: {score: state, headline: success}}
report: [json, html]
"""


def mutate(runner, shop, tmp_path, *args, plugins=()):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    return runner.invoke(cli, ["mutate", str(shop), "--pipeline", str(pipeline), "--workspace",
                               str(tmp_path / "ws"), *args], obj={"plugins": (briefs_plugin(), *plugins)})


def dialog_of(ws: Path, run_id: str) -> dict:
    report = read_report((ws / "runs" / run_id / "report.json"))
    [dialog] = [i["value"] for i in report["items"] if i["step"] == "dialogs"]
    return dialog


@pytest.fixture
def mutated(runner, shop, tmp_path):
    result = mutate(runner, shop, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), tmp_path / "ws"


def test_a_state_checking_suite_kills_every_built_in_mutant_but_the_leak(mutated):
    found, _ = mutated
    assert set(found) == {"drop-writes", "wrong-record", "skip-lookup", "leak", "refuse-all"}
    for name, result in found.items():
        assert result["n"] == 1  # the one item passes with the agent itself
        expected = [] if name == "leak" else ["S1"]
        assert result["killed"] == expected, name
        assert result["kill_rate"] == len(expected)
        assert (result["caught_by"] == {"state": 1}) == bool(expected)


def tool_calls(dialog: dict) -> list[dict]:
    return [c for t in dialog["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]


def test_drop_writes_answers_a_write_as_done_and_leaves_the_database_alone(mutated):
    found, ws = mutated
    dialog = dialog_of(ws, found["drop-writes"]["run_id"])
    [lookup, write] = tool_calls(dialog)
    assert json.loads(write["output"])["credit"] == 15 and not write["error"]  # what success says
    assert dialog["db_diff"]["tables"] == {}


def test_wrong_record_writes_another_existing_record_of_the_same_table(mutated):
    found, ws = mutated
    dialog = dialog_of(ws, found["wrong-record"]["run_id"])
    [_, write] = tool_calls(dialog)
    assert json.loads(write["arguments"]) == {"customer_id": "c1", "amount": 5}  # as the agent made it
    changed = dialog["db_diff"]["tables"]["customers"]
    assert list(changed["changed"]) == ["c2"] and changed["changed"]["c2"][0]["after"] == 5


def test_skip_lookup_answers_reads_with_an_empty_result(mutated):
    found, ws = mutated
    dialog = dialog_of(ws, found["skip-lookup"]["run_id"])
    [lookup, write] = tool_calls(dialog)
    assert lookup["output"] == "{}" and not lookup["error"]
    assert json.loads(write["output"])["credit"] == 15  # writes go through
    assert "someone" in dialog["turns"][1]["content"]


def test_leak_puts_another_customers_record_in_the_first_reply(mutated):
    found, ws = mutated
    dialog = dialog_of(ws, found["leak"]["run_id"])
    reply = dialog["turns"][1]["content"]
    assert reply.startswith("Done: Ana {not a template} now has more credit.")
    leaked = json.loads(reply.split("on file: ", 1)[1])
    assert leaked["customer_id"] == "c2" and leaked["name"] == "Bo"  # not the one talked about


def test_refuse_all_refuses_without_asking_the_agent(mutated):
    found, ws = mutated
    dialog = dialog_of(ws, found["refuse-all"]["run_id"])
    assert [t["content"] for t in dialog["turns"] if t["role"] == "assistant"] == [
        "I'm sorry, but I can't help with that request."]
    assert tool_calls(dialog) == []


def test_mutant_runs_reuse_the_items_before_the_agent_but_never_its_dialogs(runner, shop, tmp_path, mutated):
    found, ws = mutated
    store = Store.for_workspace(ws)
    [baseline] = [read_report(p)["mutation"]["baseline"] for p in ws.glob("runs/*/report.json")
                  if json.loads(p.read_text()).get("mutation")]
    runs = [r["run_id"] for r in found.values()]

    def keys(run_id, step):
        return {row["item"]: row["key"] for row in store.run_items(run_id, step)}

    assert all(keys(r, "briefs") == keys(baseline, "briefs") for r in runs)
    dialogs = [keys(r, "dialogs")["S1"] for r in [baseline, *runs]]
    assert len(set(dialogs)) == len(dialogs)  # the agent's and each mutant's dialogs are their own
    again = mutate(runner, shop, tmp_path, "--json", "--mutants", "leak")
    assert again.exit_code == 0, again.output
    rerun = json.loads(again.stdout)["leak"]["run_id"]
    assert keys(rerun, "dialogs") == keys(found["leak"]["run_id"], "dialogs")  # a versioned agent: reused


def test_the_agents_report_holds_what_the_mutants_found(mutated):
    found, ws = mutated
    reports = {p.parent.name: read_report(p) for p in ws.glob("runs/*/report.json")}
    [(run_id, report)] = [(k, r) for k, r in reports.items() if r.get("mutation")]
    mutation = report["mutation"]
    assert mutation["baseline"] == run_id and mutation["passing"] == 1
    assert mutation["killed_mutants"] == 4 and mutation["score"] == 0.8
    assert set(mutation["mutants"]) == set(found)
    page = (ws / "runs" / run_id / "report.html").read_text()
    assert "id=mutants" in page and "4/5 mutants killed" in page
    assert page.count("<td><code>S1</code></td>") == 4 and page.count("state ×1") == 4  # killed ids, what caught them
    for name, result in found.items():
        assert reports[result["run_id"]]["info"]["provenance"]["agent"]["mutant"] == f"intellagent/{name}"
    assert report["info"]["provenance"]["agent"]["mutant"] is None


def test_the_terminal_says_what_each_mutant_killed_and_the_mutation_score(runner, shop, tmp_path):
    result = mutate(runner, shop, tmp_path, "--mutants", "drop-writes,leak")
    assert result.exit_code == 0, result.output
    assert "drop-writes: killed 1 of 1 passing item(s), kill rate 100% (21%–100%, n=1); caught by state ×1" \
        in result.stdout
    assert "leak: killed 0 of 1 passing item(s)" in result.stdout
    assert "mutation score: 1/2 mutants killed (50%)" in result.stdout
    lines = result.stdout.splitlines()
    after = lines[next(i for i, line in enumerate(lines) if line.startswith("  drop-writes:")) + 1:]
    assert after[:2] == ["    killed: S1", "    metrics that fell: success 100% → 0%"]
    assert after[2].startswith("  leak: killed 0")  # nothing killed, nothing named


def test_the_terminal_names_the_first_killed_items_and_how_many_more():
    result = MutantResult(mutant="m", run_id="r", killed=[f"T{i:03d}" for i in range(23)], n=23)
    [killed] = result.details()
    assert killed == "killed: " + ", ".join(f"T{i:03d}" for i in range(20)) + ", … and 3 more (report.json)"


def test_unknown_mutants_and_pipelines_without_an_agent_are_refused_in_one_line(runner, shop, tmp_path):
    result = mutate(runner, shop, tmp_path, "--mutants", "drop-writes,typo")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "--mutants" in result.output and "typo" in result.output and "drop-writes" in result.output
    pipeline = tmp_path / "coins.yaml"
    pipeline.write_text("steps:\n  briefs: {use: acme/briefs}\nreport: [json]\n")
    result = runner.invoke(cli, ["mutate", str(shop), "--pipeline", str(pipeline), "--workspace",
                                 str(tmp_path / "ws")], obj={"plugins": (briefs_plugin(),)})
    assert result.exit_code == 2 and "does not talk to an agent" in result.output
    assert "Traceback" not in result.output


# -- a mutant of a plugin's own ----------------------------------------------------------------

class Shout(Mutant):
    name = "shout"
    description = "every reply in capitals"

    async def turn(self, agent, messages, tools) -> AgentTurn:
        turn = await agent.step(messages, tools)
        return turn.model_copy(update={"content": (turn.content or "").upper()})


def mutants_plugin(name: str, *mutants: type) -> types.ModuleType:
    """A plugin module of namespace ``acme`` registering ``mutants``."""
    module = types.ModuleType(name)
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_mutants = hookimpl(lambda register: [register(m) for m in mutants])
    return module


def test_hook_register_mutants(runner, shop, tmp_path):
    shouting = mutants_plugin("shouting", Shout)
    assert load_registry(plugins=[shouting]).resolve("mutant", "shout").value is Shout
    result = mutate(runner, shop, tmp_path, "--mutants", "acme/shout", "--json", plugins=(shouting,))
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["acme/shout"]
    dialog = dialog_of(tmp_path / "ws", found["run_id"])
    assert dialog["turns"][1]["content"] == "DONE: ANA {NOT A TEMPLATE} NOW HAS MORE CREDIT."
    assert found["killed"] == [] and found["n"] == 1  # τ-bench's output rule ignores case: survived


def test_a_mutant_named_twice_runs_once_and_no_name_is_refused(runner, shop, tmp_path):
    result = mutate(runner, shop, tmp_path, "--mutants", "drop-writes,drop-writes,intellagent/drop-writes")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("drop-writes: killed") == 1
    assert "mutation score: 1/1 mutants killed (100%)" in result.stdout
    for names in (",", " , "):
        result = mutate(runner, shop, tmp_path, "--mutants", names)
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert "--mutants" in result.output and "no mutant name given" in result.output


# -- a third-party mutant that raises: its dialog's agent-error, never a crashed run, nor a kill --

class RaisesInTurn(Mutant):
    name = "raises-in-turn"

    async def turn(self, agent, messages, tools) -> AgentTurn:
        raise RuntimeError("turn broke")


class RaisesInArguments(Mutant):
    name = "raises-in-arguments"

    def arguments(self, tool, arguments):
        raise KeyError("arguments broke")


class RaisesInResult(Mutant):
    name = "raises-in-result"

    def result(self, tool, arguments, result):
        raise ValueError("result broke")


class RaisesWhenMade(Mutant):
    name = "raises-when-made"

    def __init__(self, env, rng):
        raise OSError("cannot be made")


def test_a_mutant_that_raises_fails_its_dialog_but_kills_nothing(runner, shop, tmp_path):
    broken = mutants_plugin("broken_mutants", RaisesInTurn, RaisesInArguments, RaisesInResult, RaisesWhenMade)
    names = "acme/raises-in-turn,acme/raises-in-arguments,acme/raises-in-result,acme/raises-when-made"
    result = mutate(runner, shop, tmp_path, "--mutants", names, "--json", plugins=(broken,))
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    for name, what in (("raises-in-turn", "RuntimeError: turn broke (in turn)"),
                       ("raises-in-arguments", "KeyError: 'arguments broke' (in arguments)"),
                       ("raises-in-result", "ValueError: result broke (in result)"),
                       ("raises-when-made", "OSError: cannot be made (in its construction)")):
        dialog = dialog_of(tmp_path / "ws", found[f"acme/{name}"]["run_id"])
        assert dialog["stop_reason"] == "agent-error", (name, dialog)  # the turn fails, the run goes on
        assert f"the mutant {name} raised {what}" in dialog["error"], (name, dialog["error"])
        # the mutant's own bug is no fault the suite caught: listed apart, out of the rate
        assert found[f"acme/{name}"]["killed"] == [] and found[f"acme/{name}"]["n"] == 0, name
        assert what in found[f"acme/{name}"]["mutant_errors"]["S1"], name
    again = mutate(runner, shop, tmp_path, "--mutants", names, plugins=(broken,))
    assert "raises-in-turn: killed 0 of 0 passing item(s)" in again.stdout
    assert "1 failed because the mutant raised (not counted)" in again.stdout
    assert "not counted, the mutant raised: S1: the mutant raises-in-turn raised RuntimeError" in again.stdout
    assert "mutation score: 0/0 mutants killed (–)" in again.stdout


class AgentRaises(Mutant):
    """A mutant whose turn lets what the agent raises through: the agent's error, not the mutant's."""
    name = "agent-raises"

    async def turn(self, agent, messages, tools) -> AgentTurn:
        return await agent.step([], tools)  # shop_agent reads messages[-1]: IndexError


def test_what_the_agent_raises_under_a_mutant_stays_the_agents_error(runner, shop, tmp_path):
    module = mutants_plugin("agent_raises", AgentRaises)
    result = mutate(runner, shop, tmp_path, "--mutants", "acme/agent-raises", "--json", plugins=(module,))
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["acme/agent-raises"]
    dialog = dialog_of(tmp_path / "ws", found["run_id"])
    assert dialog["stop_reason"] == "agent-error" and "the mutant" not in dialog["error"], dialog["error"]
    assert found["killed"] == ["S1"] and found["mutant_errors"] == {}


class Noop(Mutant):
    """A mutant whose fault changes nothing: equivalent to the agent."""
    name = "noop"


def test_an_equivalent_mutant_is_left_out_of_the_score_and_survivors_say_why(runner, shop, tmp_path):
    module = mutants_plugin("noop", Noop)
    result = mutate(runner, shop, tmp_path, "--mutants", "drop-writes,leak,acme/noop", "--json", plugins=(module,))
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["acme/noop"]["why_survived"] == {"S1": "its dialog is the agent's own: the fault never applied"}
    assert found["leak"]["why_survived"] == {"S1": "the fault changed its dialog, and no check failed"}
    assert (found["acme/noop"]["changed"], found["leak"]["changed"], found["drop-writes"]["changed"]) == (0, 1, 1)
    result = mutate(runner, shop, tmp_path, "--mutants", "drop-writes,leak,acme/noop", plugins=(module,))
    assert "noop: killed 0 of 1 passing item(s)" in result.stdout
    assert "its fault changed no dialog (equivalent here)" in result.stdout
    assert "survived (the fault changed its dialog, and no check failed): S1" in result.stdout
    page = max((p for p in (tmp_path / "ws").glob("runs/*/report.html") if "id=mutants" in p.read_text()),
               key=lambda p: p.stat().st_mtime).read_text()
    assert "the fault never applied: <code>S1</code>" in page and "no check failed: <code>S1</code>" in page
    # the score counts drop-writes (killed) and leak (survived), not the mutant that changed nothing
    assert ("mutation score: 1/2 mutants killed (50%); 1 item(s) pass with the agent itself; "
            "not scored: acme/noop (its fault changed no dialog: equivalent to the agent here)") in result.stdout


# -- an agent behind HTTP, the harness running its calls or the agent running them over MCP ------

def http_shop_agent(mcp: bool):
    """``shop_agent`` behind HTTP: asking the harness for its tool calls, or (``mcp``) making
    the same calls itself through the dialog's MCP URL and answering in one turn."""
    from mcp import Client
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def own_tools(url: str) -> str:
        async with Client(url) as tools:
            read = await tools.call_tool("get_customer", {"customer_id": "c1"})
            await tools.call_tool("add_credit", {"customer_id": "c1", "amount": 5})
        found = json.loads(read.content[0].text or "{}") if read.content else {}
        return f"Done: {found.get('name', 'someone')} now has more credit."

    async def chat(request):
        body = await request.json()
        if mcp:
            return JSONResponse({"content": await own_tools(body["tools_url"])})
        reply = shop_agent(body["messages"], body["tools"])
        if isinstance(reply, str):
            return JSONResponse({"content": reply})
        return JSONResponse({"tool_calls": [{"id": f"c{i}", **c} for i, c in enumerate(reply["tool_calls"])]})

    return lambda base: Starlette(routes=[Route("/", chat, methods=["POST"])])


@pytest.mark.parametrize("mcp", [False, True], ids=["harness-runs-its-calls", "runs-its-own-over-mcp"])
def test_mutants_wrap_an_agent_behind_http(runner, shop, tmp_path, mcp):
    from tests.test_mcp_a2a_agents import Served

    served = Served(http_shop_agent(mcp))
    try:
        agent = f"url: '{served.base}/', version: '1'" + (", tools: mcp" if mcp else "")
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(PIPELINE.replace('use: python, with: {callable: "tests.test_mutants:shop_agent", version: "1"}',
                                             f"use: http, with: {{{agent}}}"))
        result = runner.invoke(cli, ["mutate", str(shop), "--pipeline", str(pipeline), "--workspace",
                                     str(tmp_path / "ws"), "--json"], obj={"plugins": (briefs_plugin(),)})
    finally:
        served.close()
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert {name: r["killed"] for name, r in found.items()} == {
        "drop-writes": ["S1"], "wrong-record": ["S1"], "skip-lookup": ["S1"], "leak": [], "refuse-all": ["S1"]}
    ws = tmp_path / "ws"
    dropped, wrong = dialog_of(ws, found["drop-writes"]["run_id"]), dialog_of(ws, found["wrong-record"]["run_id"])
    assert [c["name"] for c in tool_calls(dropped)] == ["get_customer", "add_credit"]  # the agent's calls, as it made them
    assert dropped["db_diff"]["tables"] == {}
    assert list(wrong["db_diff"]["tables"]["customers"]["changed"]) == ["c2"]


def test_mutating_a_black_box_agent_again_asks_it_again(runner, shop, tmp_path):
    """An HTTP agent without a version may have changed behind its URL: a second `mutate` reuses
    the items before the agent, never its dialogs (its own or a mutant's)."""
    from tests.test_mcp_a2a_agents import Served

    served = Served(http_shop_agent(False))
    try:
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(PIPELINE.replace('use: python, with: {callable: "tests.test_mutants:shop_agent", version: "1"}',
                                             f"use: http, with: {{url: '{served.base}/'}}"))
        runs = []
        for _ in range(2):
            result = runner.invoke(cli, ["mutate", str(shop), "--pipeline", str(pipeline), "--workspace",
                                         str(tmp_path / "ws"), "--json", "--mutants", "drop-writes"],
                                   obj={"plugins": (briefs_plugin(),)})
            assert result.exit_code == 0, result.output
            found = json.loads(result.stdout)["drop-writes"]
            assert found["killed"] == ["S1"]
            runs.append(found["run_id"])
    finally:
        served.close()
    store = Store.for_workspace(tmp_path / "ws")

    def keys(run_id, step):
        return {row["item"]: row["key"] for row in store.run_items(run_id, step)}

    assert keys(runs[0], "briefs") == keys(runs[1], "briefs")
    assert keys(runs[0], "dialogs")["S1"] != keys(runs[1], "dialogs")["S1"]
