"""IntellAgent's own metrics: the per-policy table and coverage of policies and policy pairs."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_TURNS
from intellagent.metrics import Column, GateValues, Metric, MetricResult, Rate
from intellagent.model import StrictModel
from intellagent_plugins.intellagent.artefacts import Event, PolicyGraph


def _step_giving(plan: Any, name: str, kind: type) -> str | None:
    step = plan.steps.get(name)
    if step is None:
        return f"no step named '{name}' (steps: {', '.join(plan.steps)})"
    if step.output.base is not kind:
        return f"step '{name}' gives {step.output}, not {kind.__name__}"
    return None


class PoliciesConfig(StrictModel):
    graph: str = Field(default="graph", description="The step giving the policy graph.")
    score: str = Field(default="policy", description="The per-policy score of the critic.")
    title: str = "Policies"
    reasons: int = Field(default=3, ge=0, le=MAX_TURNS, description="Judge's reasons shown per policy.")


class PoliciesMetric(Metric):
    """Every policy: in how many judged events it was targeted, exercised and violated, with
    the judge's reasons; most often violated first."""

    name = "policies"
    Config = PoliciesConfig

    def check(self, plan: Any) -> str | None:
        return _step_giving(plan, self.config.graph, PolicyGraph)

    def values(self, plan: Any, env: Any) -> GateValues:
        """A policy's figures (``policies.P3.violated``); its groups, the policies, come from the model."""
        return GateValues(own=[], per_group=["challenge", "targeted", "exercised", "violated", "violation_rate"])

    def compute(self, data: Any) -> MetricResult:
        c: PoliciesConfig = self.config
        graph: PolicyGraph | None = data.value(c.graph)
        counts: dict[str, Counter] = defaultdict(Counter)
        reasons: dict[str, list[str]] = defaultdict(list)
        for _, score in data.scores(c.score):
            pid = str(score.labels.get("policy"))
            counts[pid][score.status] += 1
            if score.status == "fail" and score.note and len(reasons[pid]) < c.reasons:
                reasons[pid].append(score.note)
        rows = []
        for p in (graph.policies if graph else []):
            n = counts.get(p.id, Counter())
            exercised = n["pass"] + n["fail"]
            rate = Rate.of(n["fail"], exercised)
            rows.append({"id": p.id, "policy": p.text, "category": p.category,
                         "challenge": p.challenge, "targeted": sum(n.values()),
                         "exercised": exercised, "violated": n["fail"],
                         "violation_rate": rate.model_dump(), "reasons": " | ".join(reasons[p.id])})
        rows.sort(key=lambda r: (-(r["violation_rate"]["rate"] or -1), -r["exercised"], r["id"]))
        return MetricResult(
            name=self.name, title=c.title,
            description="Targeted = judged events that test the policy; a policy counts as "
                        "violated or followed only where the judge found it exercised.",
            columns=[Column(key="id", label="id", group=True, items_by="policy"),
                     Column(key="policy", label="policy"),
                     Column(key="category", label="category", items_by="category"),
                     Column(key="challenge", label="challenge", kind="number"),
                     Column(key="targeted", label="targeted", kind="number"),
                     Column(key="exercised", label="exercised", kind="number"),
                     Column(key="violated", label="violated", kind="number"),
                     Column(key="violation_rate", label="violation rate", kind="rate", better="lower"),
                     Column(key="reasons", label="judge's reasons")],
            rows=rows)


class CoverageConfig(StrictModel):
    graph: str = Field(default="graph", description="The step giving the policy graph.")
    events: str = Field(default="events", description="The step giving the events.")
    title: str = "Coverage"


class _Policies(BaseModel):
    policies: list[str]


class _Covers(BaseModel):
    """What coverage reads of an event: its status and its policies. The rest of its payload
    (its rows, texts and expectations) is skipped, not made into models."""

    status: str = "ok"
    spec: _Policies


class CoverageMetric(Metric):
    """Share of the graph's policies in at least one valid event, and of its policy pairs
    (weight > 0) met together in one."""

    name = "coverage"
    Config = CoverageConfig

    def check(self, plan: Any) -> str | None:
        return _step_giving(plan, self.config.graph, PolicyGraph) or \
            _step_giving(plan, self.config.events, Event)

    def values(self, plan: Any, env: Any) -> GateValues:
        return GateValues(own=["policies", "pairs"], per_group=[])

    def compute(self, data: Any) -> MetricResult:
        c: CoverageConfig = self.config
        graph: PolicyGraph | None = data.value(c.graph)
        covered: set[str] = set()
        met: set[frozenset] = set()
        for _, event in data.values(c.events, as_type=_Covers):
            if event.status == "ok":
                ids = event.spec.policies
                covered |= set(ids)
                met |= {frozenset((a, b)) for a in ids for b in ids if a != b}
        policies = {p.id for p in graph.policies} if graph else set()
        pairs = {frozenset((e.a, e.b)) for e in graph.edges if e.weight > 0} if graph else set()
        policy_cov = round(len(covered & policies) / len(policies), 4) if policies else 0.0
        pair_cov = round(len(met & pairs) / len(pairs), 4) if pairs else 0.0
        return MetricResult(
            name=self.name, title=c.title,
            headline=f"coverage: policies {policy_cov:.0%}, policy pairs {pair_cov:.0%}",
            values={"policies": policy_cov, "pairs": pair_cov},
            columns=[Column(key="what", label="what"), Column(key="covered", label="covered", kind="percent"),
                     Column(key="of", label="of", kind="number")],
            rows=[{"what": "policies in at least one valid event", "covered": policy_cov,
                   "of": len(policies)},
                  {"what": "policy pairs of the graph (weight > 0) met together", "covered": pair_cov,
                   "of": len(pairs)}])
