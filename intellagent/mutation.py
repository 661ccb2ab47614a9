"""What ``intellagent mutate`` finds: for each mutant, the items it *kills* (they pass with the
agent as it is and fail with the mutant's fault around it), the kill rate with its 95 % Wilson
interval, and what caught it (the scores that failed on the killed items, the metrics whose
rate fell); for the suite, its mutation score (the share of mutants that killed any item).

Items the mutant run could not finish (an infra error, a budget stop) are neither killed nor
survivors: they are listed apart, and left out of the rate.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from intellagent.metrics import Rate
from intellagent.results import finals, judged


SHOWN_IDS = 20  # killed items a terminal line names; report.json and --json have them all


class MutantResult(BaseModel):
    mutant: str
    description: str = ""
    run_id: str = Field(description="The run with the mutant around the agent.")
    killed: list[str] = Field(default_factory=list, description="Items that pass with the agent "
                              "and fail with the mutant.")
    survived: list[str] = Field(default_factory=list, description="Items that pass with both.")
    unfinished: list[str] = Field(default_factory=list, description="Items that pass with the "
                                  "agent which the mutant run could not finish (not counted).")
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
                + (f"; {len(self.unfinished)} could not finish" if self.unfinished else ""))


    def details(self, shown: int = SHOWN_IDS) -> list[str]:
        """The killed items (the first ``shown``) and the metrics that fell, a line each."""
        lines = []
        if self.killed:
            more = len(self.killed) - shown
            lines.append("killed: " + ", ".join(self.killed[:shown])
                         + (f", … and {more} more (report.json)" if more > 0 else ""))
        if self.metrics:
            lines.append("metrics that fell: " + ", ".join(f"{k} {v}" for k, v in self.metrics.items()))
        return lines


class MutationReport(BaseModel):
    """Every mutant's result against one run of the agent (the baseline)."""

    baseline: str = Field(description="The run of the agent as it is.")
    passing: int = Field(default=0, description="Items that pass with the agent.")
    mutants: dict[str, MutantResult] = Field(default_factory=dict)
    killed_mutants: int = 0
    score: float | None = Field(default=None, description="Mutation score: the share of mutants "
                                "that killed at least one item.")

    def summary(self) -> str:
        if not self.mutants:
            return "mutation score: – (no mutant)"
        return (f"mutation score: {self.killed_mutants}/{len(self.mutants)} mutants killed "
                f"({self.score:.0%}); {self.passing} item(s) pass with the agent itself")


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


def mutant_result(name: str, description: str, base: tuple[Any, Any],
                  mutated: tuple[Any, Any], deltas: list[Any]) -> MutantResult:
    """One mutant's run against the baseline's: each is (report, data); ``deltas`` are the
    rows of their comparison (:func:`intellagent.compare.compare`)."""
    (_, base_data), (report, data) = base, mutated
    before, after = finals(base_data), finals(data)
    passing = [k for k, item in before.items() if judged(base_data.plan, item) == "passed"]
    killed, survived, unfinished = [], [], []
    for key in passing:
        item = after.get(key)
        how = judged(data.plan, item) if item is not None else "unfinished"
        (killed if how == "failed" else unfinished if how == "unfinished" else survived).append(key)
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
                        killed=killed, survived=survived, unfinished=unfinished, kill_rate=rate.rate,
                        low=rate.low, high=rate.high, n=rate.n,
                        caught_by=dict(caught.most_common()), metrics=metrics)


def mutation_report(base: tuple[Any, Any], results: list[MutantResult]) -> MutationReport:
    report, data = base
    passing = sum(1 for item in finals(data).values() if judged(data.plan, item) == "passed")
    killed = sum(1 for r in results if r.killed)
    return MutationReport(baseline=report.info.run_id, passing=passing,
                          mutants={r.mutant: r for r in results}, killed_mutants=killed,
                          score=round(killed / len(results), 4) if results else None)
