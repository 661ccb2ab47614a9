"""What ``intellagent mutate`` finds: for each mutant, the items it *kills* (they pass with the
agent as it is and fail with the mutant's fault around it), the kill rate with its 95 % Wilson
interval, and what caught it (the scores that failed on the killed items, the metrics whose
rate fell); for the suite, its mutation score (the share of mutants that killed any item).

Items the mutant run could not finish (an infra error, a budget stop), and items that failed
because the mutant itself raised (its bug, no fault the suite caught), are neither killed nor
survivors: they are listed apart, and left out of the rate. An item whose dialogs are the
agent's own (the fault never applied there) cannot be killed; each survivor says why it survived.
A mutant whose fault changed no dialog of a passing item is equivalent to the agent on this
suite: it is left out of the mutation score, neither lowering nor raising it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from intellagent.metrics import Rate
from intellagent.mutants import MUTANT_FAILED
from intellagent.results import finals, judged

UNCHANGED = "its dialog is the agent's own: the fault never applied"
UNNOTICED = "the fault changed its dialog, and no check failed"


SHOWN_IDS = 20  # killed items a terminal line names; report.json and --json have them all


class MutantResult(BaseModel):
    mutant: str
    description: str = ""
    run_id: str = Field(description="The run with the mutant around the agent.")
    killed: list[str] = Field(default_factory=list, description="Items that pass with the agent "
                              "and fail with the mutant.")
    survived: list[str] = Field(default_factory=list, description="Items that pass with the agent "
                                "and were not killed.")
    why_survived: dict[str, str] = Field(default_factory=dict, description="Each survivor: why (the "
                                         "fault never applied to its dialog, or no check noticed it).")
    unfinished: list[str] = Field(default_factory=list, description="Items that pass with the "
                                  "agent which the mutant run could not finish (not counted).")
    mutant_errors: dict[str, str] = Field(default_factory=dict, description="Items that pass with "
                                          "the agent which failed because the mutant raised: item → "
                                          "what it raised (its bug, not counted).")
    changed: int = Field(default=0, description="Items counted in n whose dialog the fault changed.")
    kill_rate: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = Field(default=0, description="Items that pass with the agent and finished with the "
                   "mutant: the rate's denominator.")
    caught_by: dict[str, int] = Field(default_factory=dict, description="Scores that failed on "
                                      "the killed items (a per-subject score by its first other "
                                      "label, e.g. a rule's category): how many items each.")
    metrics: dict[str, str] = Field(default_factory=dict, description="Metrics whose overall rate "
                                    "fell with the mutant: metric → 'A → B'.")

    def line(self) -> str:
        rate = Rate.of(len(self.killed), self.n)
        caught = ", ".join(f"{k} ×{n}" for k, n in self.caught_by.items())
        return (f"{self.mutant}: killed {len(self.killed)} of {self.n} passing item(s), "
                f"kill rate {rate.text()}" + (f"; caught by {caught}" if caught else "")
                + (f"; {len(self.unfinished)} could not finish" if self.unfinished else "")
                + (f"; {len(self.mutant_errors)} failed because the mutant raised (not counted)"
                   if self.mutant_errors else "")
                + ("; its fault changed no dialog (equivalent here)" if self.equivalent else ""))

    @property
    def equivalent(self) -> bool:
        """Its fault changed no dialog of the items it ran on: on this suite, the agent itself."""
        return self.n > 0 and self.changed == 0


    def details(self, shown: int = SHOWN_IDS) -> list[str]:
        """The killed items (the first ``shown``) and the metrics that fell, a line each."""
        lines = []
        if self.killed:
            more = len(self.killed) - shown
            lines.append("killed: " + ", ".join(self.killed[:shown])
                         + (f", … and {more} more (report.json)" if more > 0 else ""))
        survivors: dict[str, list[str]] = {}
        for key in self.survived:
            survivors.setdefault(self.why_survived.get(key, ""), []).append(key)
        for why, keys in survivors.items():
            more = len(keys) - shown
            lines.append(f"survived ({why}): " if why else "survived: ")
            lines[-1] += ", ".join(keys[:shown]) + (f", … and {more} more (report.json)" if more > 0 else "")
        for key, error in list(self.mutant_errors.items())[:shown]:
            lines.append(f"not counted, the mutant raised: {key}: {error}")
        if self.metrics:
            lines.append("metrics that fell: " + ", ".join(f"{k} {v}" for k, v in self.metrics.items()))
        return lines


class MutationReport(BaseModel):
    """Every mutant's result against one run of the agent (the baseline)."""

    baseline: str = Field(description="The run of the agent as it is.")
    passing: int = Field(default=0, description="Items that pass with the agent.")
    mutants: dict[str, MutantResult] = Field(default_factory=dict)
    killed_mutants: int = 0
    scored_mutants: int = Field(default=0, description="Mutants the score counts: those whose fault "
                                "changed a dialog of an item that passes with the agent.")
    not_scored: dict[str, str] = Field(default_factory=dict, description="Mutants left out of the "
                                       "score: name → why (equivalent here, or nothing to kill).")
    score: float | None = Field(default=None, description="Mutation score: the share of the scored "
                                "mutants that killed at least one item (None when none is scored).")

    def summary(self) -> str:
        if not self.mutants:
            return "mutation score: – (no mutant)"
        if not self.passing:
            return "mutation score: – (no item passes with the agent itself: a mutant has nothing to kill)"
        score = f"{self.score:.0%}" if self.score is not None else "–"
        why: dict[str, list[str]] = {}
        for name, reason in self.not_scored.items():
            why.setdefault(reason, []).append(name)
        left = "; not scored: " + "; ".join(f"{', '.join(v)} ({k})" for k, v in why.items()) if why else ""
        return (f"mutation score: {self.killed_mutants}/{self.scored_mutants} mutants killed "
                f"({score}); {self.passing} item(s) pass with the agent itself{left}")


def _caught(plan: Any, items: list[Any]) -> Counter:
    """The failing scores of ``items``: by name, a per-subject score by its first other label."""
    declared = plan.declared_scores()
    found: Counter = Counter()
    for item in items:
        seen = set()
        for score in item.scores:
            spec = declared.get(score.name)
            if spec is None or spec.statuses is None or score.status not in spec.statuses.failed:
                continue
            key = score.name
            if spec.subject:
                other = next((label for label in spec.labels if label != spec.subject), None)
                if other is not None and other in score.labels:
                    key = f"{score.name} [{score.labels[other]}]"
            seen.add(key)
        found.update(seen)
    return found


def _scored_items(data: Any, keys: set[str]) -> dict[str, list[Any]]:
    """Every step's entry of the items ``keys`` that carries scores."""
    out: dict[str, list[Any]] = {}
    for item in data.items(scored=True):
        if item.item in keys:
            out.setdefault(item.item, []).append(item)
    return out


def _owner(item: Any, keys: set[str]) -> str | None:
    """The item of ``keys`` a store row belongs to: itself, or the item it was made under (its
    key before the first '/'); None for neither."""
    return next((k for k in (item.item, item.item.split("/")[0]) if k in keys), None)


def _agent_values(data: Any, keys: set[str]) -> dict[str, list[tuple[str, str, str]]]:
    """Each item's values at the steps that talk to the agent (step, item, value hash): equal
    in two runs when the agent's side of its dialogs is the same."""
    talking = [name for name, step in data.plan.steps.items() if step.uses_agent]
    out: dict[str, list[tuple[str, str, str]]] = {}
    for name in talking:
        for item in data.items(name):
            key = _owner(item, keys)
            if key is not None:
                out.setdefault(key, []).append((name, item.item, item.value_hash))
    return {k: sorted(v) for k, v in out.items()}


def _mutant_errors(data: Any, keys: set[str]) -> dict[str, str]:
    """The items whose mutant raised: item → what it raised (the first such warning)."""
    out: dict[str, str] = {}
    for item in data.items():
        key = _owner(item, keys)
        found = next((w for w in item.warnings if w.startswith(MUTANT_FAILED)), None)
        if key is not None and found is not None:
            out.setdefault(key, found.removeprefix(MUTANT_FAILED))
    return out


def mutant_result(name: str, description: str, base: tuple[Any, Any],
                  mutated: tuple[Any, Any], deltas: list[Any]) -> MutantResult:
    """One mutant's run against the baseline's: each is (report, data); ``deltas`` are the
    rows of their comparison (:func:`intellagent.compare.compare`)."""
    (_, base_data), (report, data) = base, mutated
    before, after = finals(base_data), finals(data)
    passing = [k for k, item in before.items() if judged(base_data.plan, item) == "passed"]
    dialogs, base_dialogs = _agent_values(data, set(passing)), _agent_values(base_data, set(passing))
    raised = _mutant_errors(data, set(passing))
    killed, survived, unfinished, why, changed = [], [], [], {}, 0
    for key in passing:
        item = after.get(key)
        how = judged(data.plan, item) if item is not None else "unfinished"
        if how == "unfinished":
            unfinished.append(key)
        elif key in raised:
            continue
        else:
            # the fault never applied here (an item whose agent steps are not found under its key
            # is taken as changed: it may be killed)
            same = key in dialogs and dialogs[key] == base_dialogs.get(key)
            changed += not same
            if how == "failed" and not same:
                killed.append(key)
            else:
                survived.append(key)
                why[key] = UNCHANGED if same else UNNOTICED
    raised = {k: v for k, v in raised.items() if k not in unfinished}
    rate = Rate.of(len(killed), len(killed) + len(survived))
    scored = _scored_items(data, set(killed))
    caught = _caught(data.plan, [i for key in killed for i in scored.get(key, [])])
    metrics = {}
    for delta in deltas:
        a, b = delta.a.get("rate"), delta.b.get("rate")
        if delta.group or a is None or b is None or a == b:
            continue
        if (b < a) == (delta.better == "higher"):  # worse in the metric's own direction
            metrics[delta.metric if delta.column == "rate" else f"{delta.metric}.{delta.column}"] = f"{a:.0%} → {b:.0%}"
    return MutantResult(mutant=name, description=description, run_id=report.info.run_id,
                        killed=killed, survived=survived, why_survived=why, unfinished=unfinished,
                        mutant_errors={k: raised[k] for k in passing if k in raised},
                        changed=changed, kill_rate=rate.rate,
                        low=rate.low, high=rate.high, n=rate.n,
                        caught_by=dict(caught.most_common()), metrics=metrics)


def mutation_report(base: tuple[Any, Any], results: list[MutantResult]) -> MutationReport:
    report, data = base
    passing = sum(1 for item in finals(data).values() if judged(data.plan, item) == "passed")
    not_scored = {}
    for r in results:
        if r.equivalent:
            not_scored[r.mutant] = "its fault changed no dialog: equivalent to the agent here"
        elif not r.n:
            not_scored[r.mutant] = "no item it ran on passes with the agent and finished"
    scored = [r for r in results if r.mutant not in not_scored]
    killed = sum(1 for r in scored if r.killed)
    return MutationReport(baseline=report.info.run_id, passing=passing,
                          mutants={r.mutant: r for r in results}, killed_mutants=killed,
                          scored_mutants=len(scored), not_scored=not_scored,
                          score=round(killed / len(scored), 4) if scored else None)
