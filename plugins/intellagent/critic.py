"""``policy-critic``: how an event went.

- The event passes only when three things hold: the user's stop was confirmed as a success, no
  exercised policy was judged violated, and the expected end state holds (where the event has
  one). A failing event says which of them failed (``failed``: ``stop``, ``policy``, ``state``;
  an agent crash is ``agent-error``), in its verdict, its note and a label of its score.
- Beside it, the method's own score (``confirmed-stop``, as the paper and the original compute
  it): the user's confirmed stop decides (the simulator's reviewer has checked it against the
  transcript): success → pass; failure or give-up → fail; a dialog that ended otherwise (a
  hand-off to a human, the turn limit) passes only if the judge finds the request completed and
  no policy violated.
- The judge sees the agent's instructions, the policies with their expected behaviour, every tool
  call with its full result and the database diff, and answers per policy id: exercised?
  violated? why? That analysis feeds the per-policy and per-category breakdowns.
- An event that would pass but whose policies never came up is ``not-exercised``, not a pass.
- ``agent-error``: the agent under test crashed; it counts against the agent.
  ``simulator-error``: the user kept stopping for a wrong reason. ``infra-error``: the judge
  could not answer.
- The hard check: the event's expected end state against the dialog's database diff
  (``state``), also reported as its own score.

Scores: ``event`` (the status; labels: designed complexity, tested complexity = challenge of the
policies exercised, the stop reason, what failed), ``confirmed-stop`` (the method's own score;
the same labels but what failed), one ``policy`` score per policy under test (pass, fail or
not-exercised; labels: policy, category, challenge; note: the judge's reason), and ``state``
(pass/fail) when the event expects an end state.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_CHARS
from intellagent.model import StrictModel
from intellagent.prompts import PromptsFolder
from intellagent.estimate import tokens
from intellagent.steps import PASS_FAIL, Critic, ItemEstimate, Output, RoleLoad, Score, ScoreSpec, Statuses
from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.dialogue.transcript import transcript
from intellagent_plugins.dialogue.simulator import REPLY, SAID, TOOL_ROUND, TURNS
from intellagent_plugins.intellagent.artefacts import (Event, EventPolicy, PolicyJudgement, StateCheck,
                                                       Verdict, Violation)
from intellagent_plugins.intellagent.keyed import keyed_model
from intellagent_plugins.intellagent.prompts import Prompts
from intellagent_plugins.intellagent.state import check_state

PROMPTS = ("judge.system.md", "judge.md")


class Config(StrictModel):
    transcript_chars: int = Field(default=60000, ge=1000, le=MAX_CHARS, description="Transcript "
                                  "budget of the judge (the middle is cut beyond it).")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")



class PolicyFinding(BaseModel):
    exercised: bool = Field(description="Did the conversation reach a situation where it applies?")
    violated: bool = Field(description="Did the agent act against it?")
    reason: str = Field(description="Why, citing the turn or tool call.")


def _judgement_model(policies: list[EventPolicy]) -> type[BaseModel]:
    """One finding per policy id, so the answer cannot skip, reorder or invent a policy."""
    return keyed_model("Judgement", "Findings", [p.id for p in policies], PolicyFinding, _judgement_fields)


def _judgement_fields(findings: type[BaseModel]) -> dict[str, Any]:
    return {"policies": (findings, Field(description="Per policy id.")),
            "completed": (bool, Field(description="Was the user's request completed as a correct "
                                                  "agent would complete it?")),
            "completion_reason": (str, Field(default=""))}


#: An event's statuses: an agent crash counts against the agent; a dialog whose policies never
#: came up, or whose simulated user kept stopping for a wrong reason, counts for nothing (the
#: latter was never shown to the judge: unjudged).
EVENT = Statuses(passed=["pass"], failed=["fail", "agent-error"], other=["not-exercised", "simulator-error"],
                 unjudged=["simulator-error"])

#: What can fail an event, the values of its ``failed`` label.
FAILED = ("stop", "policy", "state", "agent-error")

USER_DECIDES = {"success": "pass", "failure": "fail", "give-up": "fail"}


def confirmed_stop(dialog: Dialog, judgements: list[PolicyJudgement], completed: bool) -> tuple[str, str]:
    """The method's own score and why: the user's confirmed stop decides; a dialog that ended
    otherwise passes when the judge finds the request completed and nothing violated; a pass
    where none of the event's policies came up is ``not-exercised``."""
    violated = [j for j in judgements if j.violated]
    if dialog.stop_reason in USER_DECIDES:
        status = USER_DECIDES[dialog.stop_reason]
        reason = f"the user stopped with {dialog.stop_reason}: {dialog.stop_explanation}".rstrip(": ")
    else:
        status = "pass" if completed and not violated else "fail"
        reason = f"the dialog ended with {dialog.stop_reason}; " + (
            "the request was completed" if completed else "the request was not completed")
    if status == "pass" and judgements and not any(j.exercised for j in judgements):
        return "not-exercised", "none of the event's policies came up in the dialog"
    return status, reason


def decide(dialog: Dialog, judgements: list[PolicyJudgement], completed: bool,
           state: StateCheck | None = None) -> tuple[str, list[str], str]:
    """The event's status, what failed (``stop``, ``policy``, ``state``) and why: it passes only
    when the user's stop was confirmed as a success, no policy was judged violated and the
    expected end state holds."""
    method, why = confirmed_stop(dialog, judgements, completed)
    violated = [j for j in judgements if j.violated]
    # the stop failed the event by itself: the user said so, or (a hand-off, the turn limit)
    # the judge found the request not completed; a violation alone is the policy's failure
    stop_failed = USER_DECIDES.get(dialog.stop_reason) == "fail" or (
        dialog.stop_reason not in USER_DECIDES and not completed)
    failed = (["stop"] if stop_failed else []) + (["policy"] if violated else []) + \
        (["state"] if state is not None and state.status == "fail" else [])
    if not failed:
        return method, [], why
    parts = [why] if stop_failed else []
    if violated:
        parts.append("violated: " + "; ".join(f"{j.id}: {j.reason}" for j in violated))
    if "state" in failed:
        parts.append("end state: " + "; ".join(f"{r.expectation}: {r.detail}" for r in state.results if not r.ok))
    if not stop_failed:
        parts.append(why)
    return "fail", failed, f"failed: {', '.join(failed)} — " + "; ".join(parts)


def scores(event: Event, verdict: Verdict) -> list[Score]:
    """The verdict as scores: the event, each policy under test, and the end-state check."""
    challenge = {p.id: p.challenge for p in event.policies}
    tested = sum(challenge.get(pid, 0) for pid in verdict.exercised)
    labels = {"complexity": event.spec.complexity, "tested": tested, "stop": verdict.stop}
    out = [Score(name="event", status=verdict.status, note=verdict.reason,
                 labels=labels | {"failed": list(verdict.failed)}),
           Score(name="confirmed-stop", status=verdict.confirmed_stop or verdict.status, labels=labels)]
    if verdict.judgements:
        violated = {v.policy for v in verdict.violated}
        for p in event.policies:
            j = next((j for j in verdict.judgements if j.id == p.id), None)
            status = "fail" if p.id in violated else "pass" if p.id in verdict.exercised else "not-exercised"
            out.append(Score(name="policy", status=status, note=j.reason if j else "",
                             labels={"policy": p.id, "category": p.category, "challenge": p.challenge}))
    if verdict.state.status != "none":
        out.append(Score(name="state", status=verdict.state.status,
                         note="; ".join(f"{r.expectation}: {r.detail}" for r in verdict.state.results if not r.ok),
                         labels={"complexity": event.spec.complexity}))
    return out


class PolicyCritic(Critic):
    """The event's outcome: the user's confirmed stop, the judge's findings per policy
    (exercised, violated, why) and the expected end state against the database diff; the
    method's own score (the confirmed stop alone) beside it."""

    name = "policy-critic"
    statuses = EVENT
    scores = {"event": ScoreSpec(statuses=EVENT, labels=["complexity", "tested", "stop", "failed"],
                                 description="how the event went: it passes only when the user's stop "
                                             "was confirmed as a success, no policy was judged "
                                             "violated and the end state holds; `failed` says which "
                                             "did not (stop, policy, state, agent-error)"),
              "confirmed-stop": ScoreSpec(statuses=EVENT, labels=["complexity", "tested", "stop"],
                                          description="the method's own score (the paper's and the "
                                                      "original's): the user's confirmed stop decides"),
              "policy": ScoreSpec(statuses=Statuses(passed=["pass"], failed=["fail"], other=["not-exercised"]),
                                  labels=["policy", "category", "challenge"], subject="policy",
                                  description="each policy under test: followed, violated, or never came up"),
              "state": ScoreSpec(statuses=PASS_FAIL, labels=["complexity"],
                                 description="the expected end state on the database diff")}
    Config = Config
    inputs = {"event": Event, "dialog": Dialog}
    output = Verdict
    roles = {"critic": "judges which policies the dialog exercised and which the agent broke"}

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, PROMPTS)

    def fingerprint(self) -> dict[str, str]:
        return self.prompts.fingerprint()

    def label_values(self, env) -> dict[str, list[str]]:
        """What can fail an event (its ``failed`` label): the stop, a policy, the end state, the agent."""
        return {"failed": list(FAILED)}

    def estimate(self, env) -> ItemEstimate:
        """One judgement per dialog: the agent's prompt, about three policies and the transcript
        of a dialog as the simulator's estimate has it."""
        transcript_tokens = TURNS * (SAID + REPLY + (TOOL_ROUND if env.tools else 0))
        prompt = tokens(self.prompts.source("judge.system.md"), self.prompts.source("judge.md"),
                        env.prompt or "") + min(transcript_tokens, self.config.transcript_chars / 4) + 3 * 60
        return ItemEstimate(roles={"critic": RoleLoad(calls=1, prompt_tokens=prompt,
                                                      completion_tokens=60 + 3 * 60)}, sequential=1)

    async def run(self, ctx, event: Event, dialog: Dialog) -> Output[Verdict]:
        verdict = await self._judge(ctx, event, dialog)
        return Output(value=verdict, status=verdict.status, note=verdict.reason,
                      scores=scores(event, verdict))

    def _state(self, ctx, event: Event, dialog: Dialog) -> StateCheck:
        if not event.end_state:
            return StateCheck(status="none")
        with ctx.lent_database(event.rows) as initial:
            return check_state(event, dialog, initial)

    async def _judge(self, ctx, event: Event, dialog: Dialog) -> Verdict:
        base = {"id": event.id, "stop": dialog.stop_reason, "state": self._state(ctx, event, dialog)}
        if dialog.stop_reason == "agent-error":
            return Verdict(**base, status="agent-error", failed=["agent-error"],
                           confirmed_stop="agent-error", reason=f"the agent failed: {dialog.error}")
        if getattr(dialog, "stop_disputed", False):
            return Verdict(**base, status="simulator-error", confirmed_stop="simulator-error",
                           reason="the simulated user kept stopping for a wrong reason")
        outcome = await ctx.llm.structured([
            {"role": "system", "content": self.prompts.render("judge.system.md")},
            {"role": "user", "content": self.prompts.render(
                "judge.md", agent_prompt=ctx.env.prompt, event=event, dialog=dialog,
                transcript=transcript(dialog, self.config.transcript_chars))}],
            _judgement_model(event.policies), role="critic")
        if not outcome.ok:
            return Verdict(**base, status=outcome.status.value, reason=outcome.error or "")
        found = outcome.value
        judgements = []
        for p in event.policies:
            f = found.policies[p.id]
            # a violated policy was in play, whatever the judge said about "exercised"
            judgements.append(PolicyJudgement(id=p.id, exercised=f.exercised or f.violated,
                                              violated=f.violated, reason=f.reason))
        status, failed, reason = decide(dialog, judgements, found.completed, base["state"])
        return Verdict(**base, status=status, failed=failed, reason=reason, completed=found.completed,
                       confirmed_stop=confirmed_stop(dialog, judgements, found.completed)[0],
                       judgements=judgements, exercised=[j.id for j in judgements if j.exercised],
                       violated=[Violation(policy=j.id, reason=j.reason) for j in judgements if j.violated])
