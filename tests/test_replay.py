"""Replay: an earlier run's dialogs against another agent. The recorded user turns are sent as
they were while the agent answers as the recorded one did; at its first other answer the
simulated user takes over from the dialog as it stands. A τ-bench oracle run replayed with the
oracle departs nowhere and asks the user model nothing; with another agent it departs at that
agent's first different turn."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.model import StrictModel
from intellagent.steps import Sampler, Simulator
from intellagent.store import Store
from tests.conftest import TAU_BENCH
from intellagent_plugins.reporters.writers import read_report

# -- τ-bench: the deterministic checks ---------------------------------------------------------


def idle_agent(messages, tools):
    return "I cannot help with that."


@pytest.fixture(scope="module")
def tau_oracle_run(tmp_path_factory):
    if not TAU_BENCH.is_dir():
        pytest.skip("shared/datasets/tau-bench not present")
    from click.testing import CliRunner

    ws = tmp_path_factory.mktemp("tau") / "ws"
    result = CliRunner().invoke(cli, ["run", "retail", "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "retail"),
                                      "--tasks", "tasks_dev.json", "--agent", "tau-bench/oracle",
                                      "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    return ws, result.stdout.split()[1].rstrip(":")


def report_of(ws: Path, run_id: str) -> dict:
    return read_report((ws / "runs" / run_id / "report.json"))


def replayed_run(result) -> str:
    return next(line.split()[-1] for line in result.stdout.splitlines() if line.startswith("compare: "))


def dialogs(report: dict) -> dict[str, dict]:
    return {i["item"]: i for i in report["items"] if i["step"] == "dialogs"}


def test_a_tau_oracle_run_replayed_with_the_oracle_departs_nowhere_and_asks_the_user_nothing(runner, tau_oracle_run):
    ws, recorded = tau_oracle_run
    result = runner.invoke(cli, ["replay", recorded, "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert "20 dialog(s), 20 followed the recording to the end, 0 departed" in result.stdout
    new = replayed_run(result)
    assert [c for c in Store.for_workspace(ws).calls(new) if c.role == "user"] == []  # not even cached
    before, after = dialogs(report_of(ws, recorded)), dialogs(report_of(ws, new))
    assert set(before) == set(after) and len(after) == 20
    for item, entry in after.items():
        [score] = entry["scores"]
        assert (score["name"], score["status"], score["value"]) == ("replay", "followed", None)
        assert entry["value"]["turns"] == before[item]["value"]["turns"]  # the same dialog again
        assert entry["value"] == before[item]["value"]  # the recorded dialog, as it was
    assert report_of(ws, new)["outcomes"] == {"pass": 20}
    assert report_of(ws, new)["info"]["provenance"]["replays"] == recorded


def test_a_tau_oracle_run_replayed_with_another_agent_departs_at_its_first_turn(runner, tau_oracle_run):
    ws, recorded = tau_oracle_run
    result = runner.invoke(cli, ["replay", recorded, "--workspace", str(ws), "--agent", "python",
                                 "--set", "agent.with.callable=tests.test_replay:idle_agent"])
    new = replayed_run(result)
    after = dialogs(report_of(ws, new))
    for entry in after.values():
        [score] = entry["scores"]
        assert (score["status"], score["value"]) == ("departed", 1)
        old = dialogs(report_of(ws, recorded))[entry["item"]]["value"]["turns"]
        # the oracle called the ground truth's tools there (or, with none, said the outputs)
        assert ("tool call" in score["note"]) == bool(old[1]["tool_calls"]), score["note"]
        assert entry["value"]["turns"][0]["content"] == old[0]["content"]  # the recorded first message
    assert "0 followed the recording to the end, 20 departed" in result.stdout
    assert "T000-0: departed at agent turn 1 (" in result.stdout
    # the user model took over from there (mock/schema, cached or asked)
    assert [c for c in Store.for_workspace(ws).calls(new) if c.role == "user"]


# -- the shop: agents that answer alike up to a turn -------------------------------------------

def _turn(messages) -> int:
    return sum(1 for m in messages if m["role"] == "user")


def agent_a(messages, tools):
    """Looks the customer up first, then says which turn it is."""
    if _turn(messages) == 1 and messages[-1]["role"] == "user":
        return {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "c1"}}]}
    return f"Reply {_turn(messages)}"


def agent_b(messages, tools):
    """Agent A, but for its third reply."""
    return "Something else entirely" if _turn(messages) == 3 else agent_a(messages, tools)


def agent_c(messages, tools):
    """Agent A, but it looks up another customer."""
    if _turn(messages) == 1 and messages[-1]["role"] == "user":
        return {"tool_calls": [{"name": "get_customer", "arguments": {"customer_id": "c2"}}]}
    return agent_a(messages, tools)


def agent_d(messages, tools):
    """Agent A in other case and spacing."""
    reply = agent_a(messages, tools)
    return f"  {reply.upper()}\n" if isinstance(reply, str) else reply


def agent_e(messages, tools):
    """Agent A in other words."""
    reply = agent_a(messages, tools)
    return "Answer number " + reply.split()[-1] if isinstance(reply, str) else reply


def scripted_user(request, response_model):
    """A user that goes on for ever, quoting the agent's last reply (its view: the agent's
    messages as 'user')."""
    said = [m["content"] for m in request.messages if m["role"] == "user"]
    return {"thought": "go on", "message": f"Turn {len(said)}; you said: {said[-1]}", "stop": "continue"}


def briefs() -> types.ModuleType:
    from intellagent_plugins.dialogue.scenario import Scenario

    class Count(StrictModel):
        count: int = 2

    class Briefs(Sampler):
        name = "briefs"
        Config = Count
        output = list[Scenario]

        def run(self, ctx):
            return [Scenario(id=f"S{i}", brief=f"Ask about account c{i}.") for i in range(1, self.config.count + 1)]

    module = types.ModuleType("replay_briefs")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: register(Briefs))
    return module


PIPELINE = """\
agent: {use: python, with: {callable: "tests.test_replay:agent_a", version: "a"}}
llm:
  default: {model: mock/function, options: {function: "tests.test_replay:scripted_user"}}
steps:
  briefs: {use: acme/briefs}
  dialogs: {use: user-agent, each: briefs, with: {max_turns: 4}}
report: [json, html]
"""


@pytest.fixture
def recorded(runner, shop, tmp_path):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(ws)],
                           obj={"plugins": (briefs(),)})
    assert result.exit_code == 0, result.output
    return ws, result.stdout.split()[1].rstrip(":")


def replay(runner, ws: Path, run_id: str, agent: str | None = None, *extra: str):
    args = ["replay", run_id, "--workspace", str(ws), *extra]
    if agent:
        args += ["--set", f"agent.with.callable=tests.test_replay:{agent}", "--set", f"agent.with.version={agent}"]
    return runner.invoke(cli, args, obj={"plugins": (briefs(),)})


def user_messages(dialog: dict) -> list[str]:
    return [t["content"] for t in dialog["turns"] if t["role"] == "user"]


def test_the_user_takes_over_at_the_first_reply_that_differs(runner, recorded):
    ws, run_id = recorded
    result = replay(runner, ws, run_id, "agent_b")
    assert result.exit_code == 0, result.output
    new = replayed_run(result)
    before, after = dialogs(report_of(ws, run_id)), dialogs(report_of(ws, new))
    for item in ("S1", "S2"):
        old, dialog = before[item]["value"], after[item]["value"]
        assert dialog["replay"]["departed"] == 3
        assert dialog["replay"]["why"].startswith("the reply differs: 'Something else entirely'")
        assert user_messages(dialog)[:3] == user_messages(old)[:3]  # sent as recorded
        # from there the simulated user plays on, from the dialog as it stands
        assert user_messages(dialog)[3] == "Turn 4; you said: Something else entirely"
        assert user_messages(old)[3] == "Turn 4; you said: Reply 3"
    users = [c for c in Store.for_workspace(ws).calls(new) if c.role == "user"]
    assert len(users) == 2  # one live user turn per dialog: the fourth
    assert "S1: departed at agent turn 3 (the reply differs" in result.stdout and "ok → ok" in result.stdout


def test_tool_calls_are_compared_by_name_and_arguments(runner, recorded):
    ws, run_id = recorded
    new = replayed_run(replay(runner, ws, run_id, "agent_c"))
    for entry in dialogs(report_of(ws, new)).values():
        assert entry["value"]["replay"]["departed"] == 1
        assert entry["value"]["replay"]["why"] == ('tool call 1 differs: get_customer({"customer_id": "c2"}) '
                                                   'instead of get_customer({"customer_id": "c1"})')


@pytest.mark.parametrize("agent,text,departed", [
    ("agent_a", "exact", None),
    ("agent_d", "exact", None),  # case and white space do not count
    ("agent_e", "exact", 1),
    ("agent_e", "any", None),  # text not compared: only the tool calls
    ("agent_e", "fuzzy:95", 1),
    ("agent_e", "tests.test_replay:same_number", None),
])
def test_reply_text_is_compared_by_the_chosen_matcher(runner, recorded, agent, text, departed):
    ws, run_id = recorded
    result = replay(runner, ws, run_id, agent, "--text", text)
    assert result.exit_code == 0, result.output
    new = replayed_run(result)
    for entry in dialogs(report_of(ws, new)).values():
        [score] = entry["scores"]
        assert score["value"] == departed
        assert (entry["value"]["replay"] or {}).get("departed") == departed  # a departure is in the dialog too
    users = [c for c in Store.for_workspace(ws).calls(new) if c.role == "user"]
    assert (len(users) == 0) == (departed is None)


def same_number(new: str, recorded: str) -> bool:
    return new.split()[-1] == recorded.split()[-1]


def test_a_replay_is_never_a_live_dialog_and_is_reused_when_run_again(runner, recorded, shop, tmp_path):
    ws, run_id = recorded
    first = replayed_run(replay(runner, ws, run_id, "agent_b"))
    again = replayed_run(replay(runner, ws, run_id, "agent_b"))
    store = Store.for_workspace(ws)

    def keys(run):
        return {r["item"]: r["key"] for r in store.run_items(run, "dialogs")}

    assert keys(first) == keys(again)  # a versioned agent: the replay is reused ...
    assert [c for c in store.calls(again) if c.role == "user"] == []  # ... and asks nothing
    same = replayed_run(replay(runner, ws, run_id, "agent_a"))
    assert set(keys(same).values()).isdisjoint(keys(run_id).values())  # never the recorded dialogs
    assert store.run_items(run_id, "briefs") and keys(first) != keys(run_id)
    assert [r["key"] for r in store.run_items(first, "briefs")] == [r["key"] for r in store.run_items(run_id, "briefs")]


def test_compare_shows_each_dialogs_departure_and_outcomes(runner, recorded):
    ws, run_id = recorded
    new = replayed_run(replay(runner, ws, run_id, "agent_b"))
    result = runner.invoke(cli, ["compare", run_id, new, "--workspace", str(ws)], obj={"plugins": (briefs(),)})
    assert result.exit_code == 0, result.output
    assert "B replayed A's dialogs: 0 of 2 followed the recording to the end" in result.stdout
    assert "  S2: departed at agent turn 3 (the reply differs" in result.stdout
    assert "replays: – → " + run_id in result.stdout  # in what differs between the two runs
    page = (ws / "runs" / f"compare-{run_id}-{new}.html").read_text()
    assert "id=replayed" in page and "Something else entirely" in page


def test_a_replay_refuses_what_it_cannot_do_in_one_line(runner, recorded, shop):
    ws, run_id = recorded
    for args, message in (
            (["--text", "fuzzy:300"], "fuzzy:N takes N from 0 to 100"),
            (["--text", "nonsense"], "unknown text matcher 'nonsense'"),
            (["--set", "steps.briefs.with.count=1"], "cannot change step 'briefs'"),
            (["--set", "seed=9"], "cannot change the seed"),
            # ran on the recorded environment while its report named this one
            (["--set", "environment=retail"], "--set environment: a replay takes the recorded run's environment")):
        result = replay(runner, ws, run_id, None, *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and result.output.count("\n") == 1, result.output
    (shop / "prompt.md").write_text("# Shop\nA changed prompt.\n")
    result = replay(runner, ws, run_id)
    assert result.exit_code == 2 and "has changed since" in result.output


def test_a_pipeline_without_a_replaying_step_is_refused(runner, shop, tmp_path):
    class Ask(Simulator):
        name = "ask-once"
        inputs = {"scenario": object}
        output = dict
        uses_agent = True

        async def run(self, ctx, scenario):
            turn = await ctx.agent().step([{"role": "user", "content": "hi"}], [])
            return {"reply": turn.content}

    plugin = briefs()
    plugin.register_stages = hookimpl(lambda register: (register(type(
        "Briefs2", (Sampler,), {"name": "briefs", "output": list[dict], "run": lambda self, ctx: [{"id": "S1"}]})),
        register(Ask)))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("agent: {use: python, with: {callable: 'tests.test_replay:agent_a'}}\n"
                        "steps:\n  briefs: {use: acme/briefs}\n  asked: {use: acme/ask-once, each: briefs}\n"
                        "report: [json]\n")
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(ws)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["replay", "--workspace", str(ws)], obj={"plugins": (plugin,)})
    assert result.exit_code == 2 and "replays a recorded dialog" in result.output


def test_a_path_the_recorded_run_took_from_its_command_line_is_not_checked_again(runner, shop, tmp_path):
    """The recorded spec was checked when its run started: a prompts folder given there with
    --set, outside the current folder, is the run's, not a pipeline file's to refuse."""
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    prompts = tmp_path / "elsewhere" / "myprompts"
    prompts.mkdir(parents=True)
    assert not prompts.resolve().is_relative_to(Path.cwd().resolve())
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(ws),
                                 "--set", f"steps.dialogs.with.prompts={prompts}"], obj={"plugins": (briefs(),)})
    assert result.exit_code == 0, result.output
    run_id = result.stdout.split()[1].rstrip(":")
    for agent in (None, "agent_b"):  # with and without flags of the replay's own
        result = replay(runner, ws, run_id, agent)
        assert result.exit_code == 0, result.output
        assert "2 dialog(s)" in result.stdout


def test_a_dialog_cut_short_before_the_recordings_end_did_not_follow_it(runner, recorded):
    ws, run_id = recorded
    result = replay(runner, ws, run_id, None, "--set", "steps.dialogs.with.max_turns=1")
    assert result.exit_code == 0, result.output
    assert "2 dialog(s), 0 followed the recording to the end, 2 departed" in result.stdout
    for entry in dialogs(report_of(ws, replayed_run(result))).values():
        assert entry["value"]["stop_reason"] == "max-turns"
        assert entry["value"]["replay"]["departed"] == 2  # it answered its first turn as recorded
        assert entry["value"]["replay"]["why"] == "stopped before the recording's end: max-turns"
        assert entry["scores"][0]["status"] == "departed"


def one_text(new: str) -> bool:
    return True


def broken_matcher(new: str, recorded: str) -> bool:
    raise ValueError("no comparison today")


@pytest.mark.parametrize("text,message", [
    ("tests.test_replay:one_text", "is not a function f(new, recorded) -> bool"),
    ("os:system", "is not a function f(new, recorded) -> bool"),
    ("tests.test_replay:broken_matcher", "'tests.test_replay:broken_matcher' raised ValueError: no comparison today"),
])
def test_a_text_matcher_that_cannot_compare_is_one_line_naming_text(runner, recorded, text, message):
    ws, run_id = recorded
    result = replay(runner, ws, run_id, "agent_e", "--text", text)
    assert result.exit_code == 2, result.output
    assert "--text" in result.output and message in result.output, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output, result.output


def test_a_run_replayed_with_its_own_agent_keeps_its_verdicts_and_calls_no_model(runner, tmp_path):
    """IntellAgent's pipeline on mock models, whose judge fabricates a verdict per request: a
    dialog that followed its recording to the end is the recorded dialog, so its verdict is the
    recorded one (reused), not a judge asked again."""
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "airline", "--events", "5", "--model", "mock/schema", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    recorded = result.stdout.split()[1].rstrip(":")
    result = runner.invoke(cli, ["replay", recorded, "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert "5 dialog(s), 5 followed the recording to the end, 0 departed" in result.stdout
    new = replayed_run(result)
    calls = Store.for_workspace(ws).calls(new)
    # the agent is asked again (its model's cache answers); the user and the judge are not asked
    assert calls and {(c.stage, c.role, c.cached) for c in calls} == {("dialogs", "agent", True)}
    before, after = report_of(ws, recorded), report_of(ws, new)
    for step in ("dialogs", "verdicts"):
        old = {i["item"]: (i["status"], i["value"]) for i in before["items"] if i["step"] == step}
        assert {i["item"]: (i["status"], i["value"]) for i in after["items"] if i["step"] == step} == old, step
    assert after["outcomes"] == before["outcomes"]
    assert all(i["scores"][0]["status"] == "followed" for i in after["items"] if i["step"] == "dialogs")


def test_a_replay_without_the_cache_replays_the_recorded_events_and_asks_no_model_for_them(runner, tmp_path):
    """--no-cache: the dialogs and what follows them are made anew, but the steps before them
    are the recorded run's: the replay made the policy graph and the events again with the
    model (other events, with a real one), paying for calls the replay is not about."""
    ws = tmp_path / "ws"
    recorded = runner.invoke(cli, ["run", "airline", "--events", "3", "--model", "mock/demo", "--workspace", str(ws)])
    assert recorded.exit_code in (0, 1), recorded.output
    store = Store.for_workspace(ws)
    run_id = store.resolve_run("latest")
    result = runner.invoke(cli, ["replay", run_id, "--no-cache", "--workspace", str(ws)])
    assert result.exit_code in (0, 1), result.output
    new = replayed_run(result)
    stages = {c.stage for c in store.calls(new) if not c.cached}
    assert stages and not stages & {"graph", "events"}, stages
    for step in ("graph", "events"):
        assert [r["key"] for r in store.run_items(new, step)] == [r["key"] for r in store.run_items(run_id, step)]
    assert "verdicts" in stages  # from the dialogs on, made anew
