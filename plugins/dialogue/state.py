"""``state-check``: a dialog of a scenario with ground truth, judged by its end state.

It passes when the dialog's final database has the same hash as a fresh copy of the scenario's
database after replaying the ground-truth actions (terminal tools, which hand the user over,
skipped), and every required output appears in the agent's replies (τ-bench's rule: case and
thousands separators aside). A dialog the agent crashed in is ``agent-error``, a failure of the
agent whatever the state (a scenario that changes nothing would otherwise pass). One score per
dialog, named ``state`` (a subclass names it and adds labels, e.g. τ-bench's task and trial).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from intellagent.environment import Row
from intellagent.errors import ConfigError
from intellagent.hashing import content_hash
from intellagent.steps import Critic, Output, Score, ScoreSpec, Statuses
from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.dialogue.scenario import Action, Scenario


#: A state check's statuses: an agent crash counts against the agent.
STATE = Statuses(passed=["pass"], failed=["fail", "agent-error"])


class StateVerdict(BaseModel):
    """How a dialog ended against its scenario's ground truth."""

    id: str
    status: Literal["pass", "fail", "agent-error"]
    reason: str = ""
    stop: str = Field(default="", description="The dialog's stop reason.")
    problems: list[str] = Field(default_factory=list, description="What differs from the ground "
                                "truth: the end state, each output never said.")


def missing_outputs(outputs: list[str], texts: list[str]) -> list[str]:
    """The expected outputs that appear in none of ``texts`` (τ-bench's rule: case and thousands
    separators aside)."""
    said = " ".join(texts).lower().replace(",", "")
    return [o for o in outputs if o.lower().replace(",", "") not in said]


def replayed_hash(env: Any, rows: list[Row], actions: list[Action]) -> str:
    """The state hash of ``env``'s seed database with ``rows`` on top after ``actions``
    (terminal tools skipped)."""
    db = env.database_with(rows)
    try:
        for action in actions:
            tool = env.tools.get(action.name)
            if tool is not None and not tool.spec.terminal:
                tool.call(db, action.arguments)
        return db.hash()
    finally:
        db.close()


class StateCheck(Critic):
    """Final database hash against the ground truth's, and every required output said."""

    name = "state-check"
    inputs = {"scenario": Scenario, "dialog": Dialog}
    output = StateVerdict
    statuses = STATE
    #: The name of the score each dialog gets, and the labels :meth:`labels` gives it.
    score_name: ClassVar[str] = "state"
    score_labels: ClassVar[tuple[str, ...]] = ()

    @property
    def scores(self) -> dict[str, ScoreSpec]:  # type: ignore[override]
        return {self.score_name: ScoreSpec(statuses=STATE, labels=list(self.score_labels),
                                           description="the end state and the outputs against the "
                                                       "ground truth")}

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._expected: dict[str, str] = {}  # replays are the same for every trial of a task

    def labels(self, scenario: Scenario) -> dict[str, Any]:
        """What the score is grouped by (a subclass adds its own)."""
        return {}

    def expected_hash(self, ctx: Any, scenario: Scenario) -> str:
        assert scenario.ground_truth is not None
        actions = scenario.ground_truth.actions
        key = content_hash([r.model_dump(mode="json") for r in scenario.rows],
                           [a.model_dump(mode="json") for a in actions])
        if key not in self._expected:
            self._expected[key] = replayed_hash(ctx.env, scenario.rows, actions)
        return self._expected[key]

    def run(self, ctx, scenario: Scenario, dialog: Dialog) -> Output[StateVerdict]:
        truth = scenario.ground_truth
        if truth is None:
            raise ConfigError(f"scenario {scenario.id} has no ground truth to check the end state "
                              "against (state-check needs scenarios made from tasks)")
        if dialog.stop_reason == "agent-error":  # a crash fails the task, whatever the state says
            return self._outcome(scenario, dialog, "agent-error", f"the agent failed: {dialog.error}", [])
        problems = []
        if ctx.env.db_schema is not None:
            if dialog.final_hash is None:
                raise ConfigError("the dialogs carry no final database hash: set `final_hash: true` "
                                  "on the simulator step (user-agent) that makes them")
            if dialog.final_hash != self.expected_hash(ctx, scenario):
                problems.append("the final database differs from the ground truth's")
        problems += [f"the agent never said {o!r}" for o in missing_outputs(truth.outputs, dialog.replies())]
        return self._outcome(scenario, dialog, "fail" if problems else "pass", "; ".join(problems), problems)

    def _outcome(self, scenario: Scenario, dialog: Dialog, status: str, reason: str,
                 problems: list[str]) -> Output[StateVerdict]:
        verdict = StateVerdict(id=scenario.id, status=status, reason=reason, stop=dialog.stop_reason,
                               problems=problems)
        score = Score(name=self.score_name, status=status, note=reason, labels=self.labels(scenario))
        return Output(value=verdict, status=status, note=reason, scores=[score])
