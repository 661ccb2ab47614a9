"""Verdicts that mean what the method means: the user's confirmed stop decides the event; the
judge's per-policy findings (keyed by policy id) feed the breakdowns; an event whose policies
never came up is not a pass; an agent crash counts against the agent; a reviewer that cannot
answer never lets a stop through; the judge sees what it judges against; and the expected end
state is checked on the database diff."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.harness import run_step
from intellagent_plugins.agents.agents import PythonAgent, PythonConfig
from intellagent_plugins.intellagent.artefacts import (Event, EventPolicy, EventSpec, Expectation,
                                                       ExpectationResult, PolicyJudgement, StateCheck)
from intellagent_plugins.intellagent.critic import Config as CriticConfig, PolicyCritic, confirmed_stop, decide
from intellagent_plugins.dialogue.dialog import Dialog, Turn
from intellagent_plugins.intellagent.simulator import Config as SimConfig, PolicyUser
from intellagent_plugins.providers.mock import FunctionModel
from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report

POLICIES = [EventPolicy(id="P2", text="Verify the user id before any change.", category="authentication/access control",
                        challenge=2, expected="asks for the user id"),
            EventPolicy(id="P5", text="Never refund a flown segment.", category="payment/financial",
                        challenge=5, expected="refuses the refund")]


def event(**extra) -> Event:
    spec = EventSpec(id="E0001", policies=["P2", "P5"], target_complexity=7, complexity=7)
    return Event(id="E0001", spec=spec, brief="You want a refund for a trip you took.",
                 user_knowledge="Your user id is rosa_ortega_8512.", policies=POLICIES, **extra)


def j(pid, exercised, violated=False, reason="because"):
    return PolicyJudgement(id=pid, exercised=exercised, violated=violated, reason=reason)


@pytest.mark.parametrize("stop,judgements,completed,status", [
    ("success", [j("P2", True), j("P5", True)], True, "pass"),
    ("success", [j("P2", False), j("P5", False)], True, "not-exercised"),
    ("failure", [j("P2", True), j("P5", True)], True, "fail"),  # the user's confirmed failure decides
    ("give-up", [j("P2", True), j("P5", False)], False, "fail"),
    ("transfer", [j("P2", True), j("P5", True)], True, "pass"),
    ("transfer", [j("P2", True), j("P5", True, violated=True)], True, "fail"),
    ("max-turns", [j("P2", True), j("P5", False)], False, "fail"),
    ("failure", [j("P2", False), j("P5", False)], False, "fail"),  # not a pass: no flag needed
    ("success", [j("P2", True), j("P5", True, violated=True)], True, "pass"),  # the method's score
])
def test_the_users_confirmed_stop_is_the_methods_own_score(stop, judgements, completed, status):
    dialog = Dialog(id="E0001", stop_reason=stop, stop_explanation="why")
    assert confirmed_stop(dialog, judgements, completed)[0] == status


PASSED_STATE = StateCheck(status="pass", results=[ExpectationResult(expectation="x becomes 1", ok=True)])
FAILED_STATE = StateCheck(status="fail", results=[ExpectationResult(expectation="x becomes 1", ok=False,
                                                                    detail="x is 2")])


@pytest.mark.parametrize("stop,judgements,completed,state,status,failed", [
    ("success", [j("P2", True), j("P5", True)], True, PASSED_STATE, "pass", []),
    ("success", [j("P2", True), j("P5", True)], True, None, "pass", []),  # no end state expected
    ("success", [j("P2", True), j("P5", True, violated=True)], True, PASSED_STATE, "fail", ["policy"]),
    ("success", [j("P2", True), j("P5", True)], True, FAILED_STATE, "fail", ["state"]),
    ("success", [j("P2", True), j("P5", True, violated=True)], True, FAILED_STATE, "fail", ["policy", "state"]),
    ("failure", [j("P2", True), j("P5", True, violated=True)], True, PASSED_STATE, "fail", ["stop", "policy"]),
    ("give-up", [j("P2", True), j("P5", False)], False, None, "fail", ["stop"]),
    ("transfer", [j("P2", True), j("P5", True, violated=True)], True, None, "fail", ["policy"]),
    ("max-turns", [j("P2", True), j("P5", False)], False, None, "fail", ["stop"]),
    ("success", [j("P2", False), j("P5", False)], True, None, "not-exercised", []),
    ("success", [j("P2", False), j("P5", False)], True, FAILED_STATE, "fail", ["state"]),
])
def test_an_event_passes_only_with_a_confirmed_success_no_violation_and_its_end_state(
        stop, judgements, completed, state, status, failed):
    dialog = Dialog(id="E0001", stop_reason=stop, stop_explanation="why")
    got, what, reason = decide(dialog, judgements, completed, state)
    assert (got, what) == (status, failed)
    if failed:  # the note says which failed, and why
        assert reason.startswith(f"failed: {', '.join(failed)} — ")
        assert ("violated: P5: because" in reason) == ("policy" in failed)
        assert ("x becomes 1: x is 2" in reason) == ("state" in failed)


def judge_reply(findings, completed=True, seen=None):
    def reply(request, model):
        if seen is not None:
            seen.append(request)
        assert model.__name__ == "Judgement", model.__name__
        return {"policies": findings, "completed": completed, "completion_reason": "done"}
    return reply


def critique(dialog, reply, ev=None):
    model = FunctionModel(reply)
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), providers={"test/fn": model})
    env = load_environment(REPO / "environments" / "airline")
    return asyncio.run(run_step(PolicyCritic(CriticConfig()), env, llm=llm, event=ev or event(), dialog=dialog))


def test_findings_are_taken_by_policy_id_not_by_position():
    dialog = Dialog(id="E0001", stop_reason="failure", stop_explanation="refunded a flown leg",
                    turns=[Turn(role="user", content="refund please"), Turn(role="assistant", content="done")])
    findings = {"P5": {"exercised": True, "violated": True, "reason": "refunded HAT001, already flown"},
                "P2": {"exercised": True, "violated": False, "reason": "asked for the id"}}
    out = critique(dialog, judge_reply(findings))
    verdict = out.value
    assert out.status == verdict.status == "fail"
    assert [v.policy for v in verdict.violated] == ["P5"]
    policy_scores = {s.labels["policy"]: s for s in out.scores if s.name == "policy"}
    assert policy_scores["P5"].status == "fail" and "already flown" in policy_scores["P5"].note
    assert policy_scores["P2"].status == "pass" and policy_scores["P2"].labels["category"] == "authentication/access control"
    event_score = next(s for s in out.scores if s.name == "event")
    assert event_score.labels == {"complexity": 7, "tested": 7, "stop": "failure", "failed": ["stop", "policy"]}
    method = next(s for s in out.scores if s.name == "confirmed-stop")
    assert method.status == "fail" and method.labels == {"complexity": 7, "tested": 7, "stop": "failure"}


def test_a_confirmed_success_with_a_violated_policy_fails_the_event_but_not_the_methods_score():
    # the agent skipped authentication; the user was happy and the reviewer confirmed the stop
    dialog = Dialog(id="E0001", stop_reason="success", stop_explanation="refund done",
                    turns=[Turn(role="user", content="refund please"), Turn(role="assistant", content="done")])
    findings = {"P2": {"exercised": True, "violated": True, "reason": "never asked for the user id"},
                "P5": {"exercised": True, "violated": False, "reason": "refused the flown leg"}}
    out = critique(dialog, judge_reply(findings))
    verdict = out.value
    assert out.status == verdict.status == "fail" and verdict.failed == ["policy"]
    assert verdict.confirmed_stop == "pass"
    assert out.note.startswith("failed: policy — violated: P2: never asked for the user id")
    by_name = {s.name: s for s in out.scores if s.name in ("event", "confirmed-stop")}
    assert by_name["event"].status == "fail" and by_name["event"].labels["failed"] == ["policy"]
    assert by_name["confirmed-stop"].status == "pass"
    assert {s.labels["policy"]: s.status for s in out.scores if s.name == "policy"} == {"P2": "fail", "P5": "pass"}


def test_a_success_where_nothing_came_up_is_not_a_pass():
    dialog = Dialog(id="E0001", stop_reason="success", turns=[Turn(role="user", content="hi")])
    findings = {"P2": {"exercised": False, "violated": False, "reason": "-"},
                "P5": {"exercised": False, "violated": False, "reason": "-"}}
    out = critique(dialog, judge_reply(findings))
    assert out.status == "not-exercised"
    assert {s.status for s in out.scores if s.name == "policy"} == {"not-exercised"}


def test_the_judge_sees_the_prompt_the_expected_behaviour_full_tool_results_and_the_diff():
    long_output = json.dumps({"reservation_id": "Z6ZQSS", "flights": ["x" * 90] * 8, "end": "TAIL-MARK"})
    assert len(long_output) > 400
    dialog = Dialog(id="E0001", stop_reason="success", turns=[
        Turn(role="user", content="refund Z6ZQSS"),
        Turn(role="assistant", content="checking", tool_calls=[
            {"id": "c1", "name": "get_reservation_details", "arguments": '{"reservation_id": "Z6ZQSS"}',
             "output": long_output}])],
        db_diff={"tables": {"reservations": {"changed": {"Z6ZQSS": [{"path": "status", "before": None,
                                                                      "after": "cancelled"}]}}}})
    seen: list = []
    findings = {p.id: {"exercised": True, "violated": False, "reason": "ok"} for p in POLICIES}
    critique(dialog, judge_reply(findings, seen=seen))
    text = seen[0].messages[-1]["content"]
    agent_prompt = (REPO / "environments" / "airline" / "prompt.md").read_text()
    assert agent_prompt.strip()[:300] in text
    assert "P5: Never refund a flown segment. → expected: refuses the refund" in text
    assert "TAIL-MARK" in text  # the whole tool result, not its first 400 characters
    assert '"after": "cancelled"' in text


def test_an_agent_crash_is_an_agent_error_counted_against_it():
    dialog = Dialog(id="E0001", stop_reason="agent-error", error="RuntimeError: boom")
    out = critique(dialog, judge_reply({}))
    assert out.status == "agent-error" and "boom" in out.note
    assert [s.status for s in out.scores if s.name == "event"] == ["agent-error"]


def test_the_end_state_is_checked_on_the_database_diff():
    env = load_environment(REPO / "environments" / "airline")
    db = env.seed_database()
    user = db.keys("users")[0]
    reservation = db.get("users", user)["reservations"][0]
    ev = event(symbols=[], rows=[], end_state=[
        Expectation(kind="field-equals", entity="R1", table="reservations", key=reservation, field="status",
                    value="cancelled"),
        Expectation(kind="row-unchanged", entity="U1", table="users", key=user),
        Expectation(kind="field-equals", entity="U1", table="users", key=user, field="membership",
                    value=db.get("users", user)["membership"]),
        Expectation(kind="row-added", table="reservations", value={"user_id": user, "cabin": "business"})])
    findings = {p.id: {"exercised": True, "violated": False, "reason": "ok"} for p in POLICIES}
    cancelled = {"tables": {"reservations": {"changed": {reservation: [
        {"path": "status", "before": None, "after": "cancelled"}]}}}}
    out = critique(Dialog(id="E0001", stop_reason="success", db_diff=cancelled), judge_reply(findings), ev)
    assert out.value.state.status == "fail"  # no business reservation was added
    # the user was satisfied and nothing was judged violated, but the end state is wrong
    assert out.status == "fail" and out.value.failed == ["state"] and out.value.confirmed_stop == "pass"
    assert "no such row added" in out.note
    assert [r.ok for r in out.value.state.results] == [True, True, True, False]
    state_score = next(s for s in out.scores if s.name == "state")
    assert state_score.status == "fail" and "no such row added" in state_score.note
    nothing = critique(Dialog(id="E0001", stop_reason="success", db_diff={"tables": {}}),
                       judge_reply(findings), ev)
    assert [r.ok for r in nothing.value.state.results] == [False, True, True, False]


# -- the simulator: a stop is never accepted unchecked ------------------------------------------

def simulate(reply, agent_fn="tests.test_verdicts:polite_agent", **config):
    model = FunctionModel(reply)
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn"), max_retries=0),
              providers={"test/fn": model})
    env = load_environment(REPO / "environments" / "airline")
    agent = PythonAgent(PythonConfig(callable=agent_fn), None)
    return asyncio.run(run_step(PolicyUser(SimConfig(**config)), env, llm=llm,
                                agent=lambda gt: agent, scenario=event())), model.history


def polite_agent(messages, tools):
    return "How can I help?"


def test_a_reviewer_that_cannot_answer_makes_the_dialog_an_infra_error():
    from intellagent.llm.errors import ServerError

    def reply(request, model):
        if model.__name__ == "UserTurn":
            turns = sum(1 for m in request.messages if m["role"] == "assistant")
            return {"thought": "t", "message": "hello" if turns == 0 else "thanks",
                    "stop": "continue" if turns == 0 else "success", "reason": "all good"}
        raise ServerError("the reviewer's endpoint is down")

    out, _ = simulate(reply)
    assert out.status == "infra-error" and out.halts
    assert out.value.stop_reason == "infra-error" and "stop check failed" in out.value.error


def test_the_users_closing_message_is_marked_and_a_disputed_stop_goes_back_to_the_user():
    reviews = []

    def reply(request, model):
        if model.__name__ == "UserTurn":
            turns = sum(1 for m in request.messages if m["role"] == "assistant")
            return {"thought": "t", "message": f"message {turns}", "stop": "continue" if turns == 0 else "success",
                    "reason": "done"}
        reviews.append(request)
        return {"correct": len(reviews) > 1, "feedback": "the agent never checked your id"}

    out, _ = simulate(reply)
    dialog = out.value
    assert dialog.stop_reason == "success" and dialog.feedback_rounds == 1
    closing = [t for t in dialog.turns if t.role == "user" and not t.delivered]
    assert len(closing) == 2  # the disputed stop and the final one never reached the agent
    assert any(t.role == "critic" and "never checked your id" in t.content for t in dialog.turns)
    assert "You want a refund" in reviews[0].messages[-1]["content"]
    assert "P2: Verify the user id" in reviews[0].messages[-1]["content"]


def test_the_task_user_persona_is_not_told_the_policies():
    seen = []

    def reply(request, model):
        seen.append(request)
        return {"thought": "t", "message": "hi", "stop": "continue", "reason": ""}

    simulate(reply, persona="task-user", stop_check=False, max_turns=1)
    system = seen[0].messages[0]["content"]
    assert "You want a refund for a trip you took." in system
    assert "Never refund a flown segment" not in system and "expected" not in system


# -- across adapters: an agent that always fails is never "0 pass, 0 fail" --------------------

class AlwaysFailing(BaseHTTPRequestHandler):
    """An agent that refuses every request (its own 4xx: counted against it; a 5xx is the agent
    out of reach, an infra error)."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["conversation_id"] == "intellagent-preflight":  # it answers the health check
            reply = b'{"content": "Hello."}'
            self.send_response(200)
        else:
            reply = b'{"error": "cannot handle this"}'
            self.send_response(422)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def broken_agent(messages, tools):
    raise RuntimeError("the agent fell over")


@pytest.mark.parametrize("adapter", ["http", "python"])
def test_an_agent_that_always_fails_scores_zero_not_nothing(adapter, runner, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), AlwaysFailing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = (f"agent.with.url=http://127.0.0.1:{server.server_address[1]}/" if adapter == "http"
                 else "agent.with.callable=tests.test_verdicts:broken_agent")
        result = runner.invoke(cli, ["run", "education", "--events", "6", "--agent", adapter, "--set", agent,
                                     "--workspace", str(tmp_path)])
    finally:
        server.shutdown()
    assert result.exit_code == 0, result.output
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    verdicts = [i for i in report["items"] if i["step"] == "verdicts"]
    assert verdicts and {v["status"] for v in verdicts} == {"agent-error"}
    success = report["metrics"]["success"]["values"]
    assert success["n"] == len(verdicts) and success["passed"] == 0 and success["rate"] == 0.0


# -- the stop reviewer sees what the tools did so far ------------------------------------------

def first_reservation() -> str:
    db = load_environment(REPO / "environments" / "airline").seed_database()
    try:
        return db.keys("reservations")[0]
    finally:
        db.close()


def cancelling_agent(messages, tools):
    """Cancels the first reservation of the seed data on the first message, then confirms."""
    if messages[-1]["role"] == "tool":
        return "It is cancelled."
    return {"content": None, "tool_calls": [{"name": "cancel_reservation",
                                             "arguments": {"reservation_id": first_reservation()}}]}


def test_the_stop_reviewer_sees_the_database_changes_so_far():
    reviews = []

    def reply(request, model):
        if model.__name__ == "UserTurn":
            turns = sum(1 for m in request.messages if m["role"] == "assistant")
            return {"thought": "t", "message": "cancel it" if turns == 0 else "thanks",
                    "stop": "continue" if turns == 0 else "success", "reason": "it was cancelled"}
        reviews.append(request.messages[-1]["content"])
        return {"correct": True, "feedback": ""}

    out, _ = simulate(reply, agent_fn="tests.test_verdicts:cancelling_agent")
    assert out.value.stop_reason == "success" and len(reviews) == 1
    review = reviews[0]
    assert "DATABASE CHANGES: none" not in review
    assert "DATABASE CHANGES (before → after)" in review and first_reservation() in review
    assert '"after": "cancelled"' in review  # the write the agent made, as the reviewer reads it
    assert "AGENT calls cancel_reservation" in review  # with the tool's result


# -- on the quickstart: no pass with a violated policy or a wrong end state ----------------------

@pytest.mark.parametrize("environment", ["airline", "retail"])
def test_on_the_quickstart_no_event_passes_with_a_violated_policy_or_a_failed_end_state(environment):
    from bench.verdict_figures import count  # the figures bench's own count, on smaller runs

    runs = [count(environment, seed=seed, events=12) for seed in (3, 4)]
    for counts in runs:
        assert counts.headline.violated == counts.headline.state_failed == 0
        assert counts.failed_by.get("policy", 0) >= counts.method.violated
    # the runs have confirmed successes in which the judge found a policy broken (the case is
    # tested), and events still pass
    assert sum(c.method.wrong for c in runs) > 0
    assert sum(c.headline.passed for c in runs) > 0
