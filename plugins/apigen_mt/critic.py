"""``trajectory-state``: τ-bench's state critic on a trajectory (the final database equals the
state after replaying a_gt on the initial one, and every o_gt was said), with the labels the
APIGen-MT metrics and exports read: the blueprint, its kind, the trajectory's signature (to keep
unique successes), whether it can be exported as training data, and the number of user turns.
A dialog the agent crashed in is ``agent-error`` (the τ-bench critic's rule), never a pass."""

from __future__ import annotations

from intellagent.steps import Output, Score
from intellagent_plugins.intellagent.artefacts import Verdict
from intellagent_plugins.tau_bench.steps import TaskEvent, TauState

from intellagent_plugins.apigen_mt.artefacts import Trajectory


def user_turns(dialog: Trajectory) -> int:
    return sum(1 for t in dialog.turns if t.role == "user" and t.delivered)


def exportable(dialog: Trajectory) -> bool:
    """A trajectory fit for training: the agent has the last word (not a crash after the user's
    message, not a transfer or a tool result left unanswered)."""
    return bool(dialog.messages) and dialog.messages[-1].get("role") == "assistant"


class TrajectoryState(TauState):
    name = "trajectory-state"
    inputs = {"event": TaskEvent, "dialog": Trajectory}
    output = Verdict

    def run(self, ctx, event: TaskEvent, dialog: Trajectory) -> Output[Verdict]:
        out = super().run(ctx, event, dialog)
        task = event.task
        turns = user_turns(dialog)
        for score in out.scores:
            score.labels |= {"blueprint": task.get("blueprint"), "kind": task.get("kind"),
                             "signature": dialog.signature(), "turns": turns,
                             "exportable": exportable(dialog)}
        out.scores.append(Score(name="turns", value=turns, labels={"kind": task.get("kind"),
                                                                   "outcome": out.status}))
        return out
