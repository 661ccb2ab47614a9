"""``trajectory-state``: τ-bench's state critic on a trajectory (the final database equals the
state after replaying a_gt on the initial one, and every o_gt was said), with the labels the
APIGen-MT metrics and exports read: the blueprint, its kind, the trajectory's signature (to keep
unique successes), whether it can be exported as training data, and the number of user turns.
A dialog the agent crashed in is ``agent-error`` (the τ-bench critic's rule), never a pass."""

from __future__ import annotations

from typing import Any

from intellagent.steps import Output, Score, ScoreSpec
from intellagent_plugins.dialogue.state import StateCheck, StateVerdict

from intellagent_plugins.apigen_mt.artefacts import BlueprintTaskEvent, Trajectory


def user_turns(dialog: Trajectory) -> int:
    return sum(1 for t in dialog.turns if t.role == "user" and t.delivered)


def exportable(dialog: Trajectory) -> bool:
    """A trajectory fit for training: the agent has the last word (not a crash after the user's
    message, not a transfer or a tool result left unanswered)."""
    return bool(dialog.messages) and dialog.messages[-1].get("role") == "assistant"


class TrajectoryState(StateCheck):
    name = "trajectory-state"
    inputs = {"scenario": BlueprintTaskEvent, "dialog": Trajectory}
    output = StateVerdict
    score_name = "task"
    score_labels = ("task", "trial", "blueprint", "kind", "signature", "turns", "exportable")

    @property
    def scores(self) -> dict[str, ScoreSpec]:  # type: ignore[override]
        return {**super().scores, "turns": ScoreSpec(value=True, labels=["kind", "outcome"],
                                                     description="user turns of the trajectory")}

    def labels(self, scenario: BlueprintTaskEvent) -> dict[str, Any]:
        return {"task": scenario.index, "trial": scenario.trial, "blueprint": scenario.blueprint,
                "kind": scenario.kind}

    def run(self, ctx, scenario: BlueprintTaskEvent, dialog: Trajectory) -> Output[StateVerdict]:
        out = super().run(ctx, scenario, dialog)
        turns = user_turns(dialog)
        for score in out.scores:
            score.labels |= {"signature": dialog.signature(), "turns": turns,
                             "exportable": exportable(dialog)}
        out.scores.append(Score(name="turns", value=turns, labels={"kind": scenario.kind,
                                                                   "outcome": out.status}))
        return out
