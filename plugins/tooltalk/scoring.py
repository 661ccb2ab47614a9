"""ToolTalk's evaluation of one replayed conversation: all predictions and all ground-truth calls
flattened, each prediction in order matched to the first remaining ground-truth call of the same
tool that it is equivalent to, and the counters and metrics that follow, with the reference
scorer's conventions for empty denominators."""

from __future__ import annotations

from typing import Callable

from intellagent_plugins.tooltalk.artefacts import (Assessment, Conversation, Counters, PredictionVerdict,
                                                    Replay, TruthVerdict, TurnSummary)
from intellagent_plugins.tooltalk.equivalence import Comparator, ToolMeta, mismatch


def counters(predictions: list[PredictionVerdict], ground_truths: int, *, agent_error: bool = False) -> Counters:
    """Precision = matches / predictions (0 without predictions); recall = matches / ground
    truth (1 without ground truth, where ToolTalk divides by zero); action precision = matched
    actions / actions (1 without actions); bad-action rate = bad actions / actions (0 without
    actions); success = recall 1 and no bad action; soft success = recall × (1 − bad-action rate).

    An agent that crashed in any turn (``agent_error``) has neither success nor soft success,
    whatever its calls: the crash counts against it. ToolTalk has no such case (a predictor's
    exception ends its whole run), so the reference's figures are untouched."""
    n = len(predictions)
    matches = sum(p.match for p in predictions)
    actions = sum(p.action for p in predictions)
    valid = sum(p.action and p.match for p in predictions)
    bad = sum(p.bad_action for p in predictions)
    precision = matches / n if n else 0.0
    recall = matches / ground_truths if ground_truths else 1.0
    action_precision = valid / actions if actions else 1.0
    bad_rate = bad / actions if actions else 0.0
    return Counters(predictions=n, ground_truths=ground_truths, matches=matches, actions=actions,
                    valid_actions=valid, bad_actions=bad, precision=precision, recall=recall,
                    action_precision=action_precision, bad_action_rate=bad_rate,
                    success=not agent_error and recall == 1.0 and bad_rate == 0.0,
                    soft_success=0.0 if agent_error else recall * (1.0 - bad_rate), agent_error=agent_error)


def assess(conversation: Conversation, replay: Replay, meta: dict[str, ToolMeta], actions: set[str],
           compare: Comparator, *, corrected: bool = False, comparator_name: str = "",
           threshold: Callable[[str, str, float], float] | None = None) -> Assessment:
    """Match ``replay``'s predictions to ``conversation``'s ground truth. ``actions`` names the
    tools that change the world; ``threshold(tool, field, declared)`` may override a declared
    text threshold."""
    truths = [TruthVerdict(turn=index, call=call, match=False) for index, call in conversation.calls()]
    remaining = list(range(len(truths)))
    verdicts: list[PredictionVerdict] = []
    flat = [(t.index, call) for t in replay.turns for call in t.predictions]
    for position, (turn, call) in enumerate(flat):
        name = call.request.api_name
        matched, why = None, ""
        for slot, g in enumerate(remaining):
            truth = truths[g].call
            if truth.request.api_name != name or name not in meta:
                continue
            tool_threshold = (lambda f, d, _n=name: threshold(_n, f, d)) if threshold else None
            reason = mismatch(call, truth, meta[name].equivalence, compare, corrected=corrected,
                              threshold=tool_threshold)
            if reason is None:
                matched = g
                del remaining[slot]
                break
            why = why or reason
        if matched is not None:
            truths[matched].match, truths[matched].prediction = True, position
        elif not why:
            why = f"no remaining ground-truth call of {name}"
        action = name in actions
        verdicts.append(PredictionVerdict(
            turn=turn, call=call, action=action, match=matched is not None, ground_truth=matched,
            bad_action=matched is None and action and call.exception is None,
            why="" if matched is not None else why))
    replies = {t.index: t for t in replay.turns}
    crashed = next((t for t in replay.turns if t.error), None)
    turns = [TurnSummary(index=i, role=t.role, text=t.text,
                         reply=replies[i].text if i in replies else None,
                         error=replies[i].error if i in replies else None)
             for i, t in enumerate(conversation.conversation)]
    return Assessment(id=conversation.id, name=conversation.name, set=conversation.set, turns=turns,
                      predictions=verdicts, ground_truth=truths,
                      metrics=counters(verdicts, len(truths), agent_error=crashed is not None),
                      agent_error=None if crashed is None else f"turn {crashed.index}: {crashed.error}",
                      comparator=comparator_name, corrected=corrected)
