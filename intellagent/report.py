"""The run report: fine-grained results computed from the run's artefacts."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, Field

from intellagent.artefacts import Dialog, Event, PolicyGraph, Verdict

SCORED = ("pass", "fail")


class Rate(BaseModel):
    n: int
    passed: int
    rate: float | None
    low: float | None = Field(description="Wilson 95 % interval, lower bound.")
    high: float | None

    @classmethod
    def of(cls, passed: int, n: int) -> "Rate":
        if n == 0:
            return cls(n=0, passed=0, rate=None, low=None, high=None)
        z = 1.96
        p = passed / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return cls(n=n, passed=passed, rate=round(p, 4), low=round(max(0.0, centre - half), 4),
                   high=round(min(1.0, centre + half), 4))


class PolicyStats(BaseModel):
    id: str
    text: str
    category: str
    challenge: int
    in_events: int
    exercised: int
    violated: int
    violation_rate: float | None


class EventResult(BaseModel):
    event: Event
    dialog: Dialog | None = None
    verdict: Verdict | None = None

    @property
    def status(self) -> str:
        if self.event.status != "ok":
            return f"event-{self.event.status}"
        return self.verdict.status if self.verdict else "not-run"


class RunReport(BaseModel):
    run_id: str | None
    environment: str
    agent: str
    seed: int
    graph: PolicyGraph
    totals: dict[str, int]
    success: Rate
    by_challenge: dict[int, Rate]
    by_category: dict[str, Rate]
    policies: list[PolicyStats]
    policy_coverage: float
    pair_coverage: float
    cost: list[dict[str, Any]]
    results: list[EventResult]
    pass_hat_k: dict[int, float] | None = Field(
        default=None, description="For task replays: mean over tasks of C(c,k)/C(n,k), with c "
                                  "passes among n scored trials.")


def pass_hat_k(results: list[EventResult]) -> dict[int, float] | None:
    """The unbiased pass^k estimator over the trials of each ground-truth task."""
    trials: dict[Any, list[bool]] = defaultdict(list)
    for r in results:
        if r.event.task is not None and r.verdict is not None and r.verdict.status in SCORED:
            trials[r.event.task.get("index")].append(r.verdict.status == "pass")
    if not trials:
        return None
    top = min(len(v) for v in trials.values())
    return {k: round(sum(math.comb(sum(v), k) / math.comb(len(v), k) for v in trials.values())
                     / len(trials), 4) for k in range(1, top + 1)}


def build_report(*, run_id: str | None, environment: str, agent: str, seed: int,
                 graph: PolicyGraph, results: list[EventResult],
                 cost: list[dict[str, Any]]) -> RunReport:
    totals: dict[str, int] = defaultdict(int)
    for r in results:
        totals[r.status] += 1
    totals["events"] = len(results)
    scored = [r for r in results if r.verdict is not None and r.verdict.status in SCORED]

    by_level: dict[int, list[bool]] = defaultdict(list)
    for r in scored:
        by_level[r.event.spec.complexity].append(r.verdict.status == "pass")

    by_cat: dict[str, list[bool]] = defaultdict(list)
    stats = {p.id: {"in": 0, "ex": 0, "vi": 0} for p in graph.policies}
    for r in results:
        for pid in r.event.spec.policies:
            stats[pid]["in"] += 1
    for r in scored:
        violated = {v.policy for v in r.verdict.violated}
        for pid in r.event.spec.policies:
            by_cat[graph.policy(pid).category].append(pid not in violated)
            stats[pid]["ex"] += pid in r.verdict.exercised
            stats[pid]["vi"] += pid in violated

    policies = [PolicyStats(id=p.id, text=p.text, category=p.category, challenge=p.challenge,
                            in_events=stats[p.id]["in"], exercised=stats[p.id]["ex"],
                            violated=stats[p.id]["vi"],
                            violation_rate=round(stats[p.id]["vi"] / stats[p.id]["ex"], 4)
                            if stats[p.id]["ex"] else None) for p in graph.policies]
    used = [r.event.spec for r in results if r.event.status == "ok"]
    covered = {pid for s in used for pid in s.policies}
    pairs = {frozenset((e.a, e.b)) for e in graph.edges if e.weight > 0}
    seen_pairs = {frozenset((a, b)) for s in used for a in s.policies for b in s.policies if a != b}
    return RunReport(
        run_id=run_id, environment=environment, agent=agent, seed=seed, graph=graph,
        totals=dict(totals),
        success=Rate.of(sum(r.verdict.status == "pass" for r in scored), len(scored)),
        by_challenge={k: Rate.of(sum(v), len(v)) for k, v in sorted(by_level.items())},
        by_category={k: Rate.of(sum(v), len(v)) for k, v in sorted(by_cat.items())},
        policies=policies,
        policy_coverage=round(len(covered) / len(graph.policies), 4) if graph.policies else 0.0,
        pair_coverage=round(len(seen_pairs & pairs) / len(pairs), 4) if pairs else 0.0,
        cost=cost, results=results, pass_hat_k=pass_hat_k(results))
