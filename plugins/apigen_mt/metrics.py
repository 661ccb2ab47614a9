"""APIGen-MT's own metrics: blueprint acceptance with and without the feedback loop, the
method's funnel, and per-task outcomes (trials, passes, unique successful trajectories, turns).
Rejections by stage and reason, trajectory success, pass^k and average turns are the generic
``counts``, ``rate``, ``pass-hat-k`` and ``mean`` over this pipeline's scores."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from intellagent.metrics import Column, Metric, MetricResult, Rate


class AcceptanceMetric(Metric):
    """Share of blueprints accepted at their first version (no feedback loop) and after
    revision (with it), and the gain."""

    name = "acceptance"

    def compute(self, data: Any) -> MetricResult:
        first = [s.status == "pass" for _, s in data.scores("blueprint-first")]
        final = [s.status == "pass" for _, s in data.scores("blueprint")]
        without, with_loop = Rate.of(sum(first), len(first)), Rate.of(sum(final), len(final))
        gain = round(with_loop.rate / without.rate, 2) if without.rate else None
        rows = [{"what": "without the feedback loop (first version)", "rate": without.model_dump()},
                {"what": "with the feedback loop (after revisions)", "rate": with_loop.model_dump()}]
        return MetricResult(
            name=self.name, title="Blueprint acceptance",
            description="Accepted blueprints among those generated; 'without' counts only those "
                        "whose first version passed every stage.",
            headline=f"blueprints accepted {with_loop.text()} with the feedback loop, "
                     f"{without.text()} without" + (f" (×{gain})" if gain else ""),
            values={"with": with_loop.rate, "without": without.rate, "gain": gain, "n": with_loop.n},
            columns=[Column(key="what", label=""), Column(key="rate", label="accepted", kind="rate")],
            rows=rows)


class FunnelMetric(Metric):
    """Contexts → blueprints accepted (first try, after revision) → combined → tasks → trials →
    successful trials → tasks solved → unique successful trajectories → those kept for export
    (ending with the agent's reply)."""

    name = "funnel"

    def compute(self, data: Any) -> MetricResult:
        blue = [s for _, s in data.scores("blueprint")]
        first = sum(s.status == "pass" for _, s in data.scores("blueprint-first"))
        combined = [s for _, s in data.scores("combined")]
        trials = [s for _, s in data.scores("task")]
        passed = [s for s in trials if s.status == "pass"]
        solved = {s.labels.get("task") for s in passed}
        unique = {(s.labels.get("task"), s.labels.get("signature")) for s in passed}
        kept = {key for s in passed if s.labels.get("exportable", True)
                for key in [(s.labels.get("task"), s.labels.get("signature"))]}
        final = defaultdict(int)
        for s in blue:
            if s.status != "pass":
                final[s.labels.get("stage")] += 1
        rows = [
            ("blueprints generated", len(blue)),
            ("accepted at the first version", first),
            ("accepted after revision", sum(s.status == "pass" for s in blue) - first),
            *[(f"rejected at {stage}", n) for stage, n in sorted(final.items())],
            ("combined tasks attempted", len(combined)),
            ("combined tasks accepted", sum(s.status == "pass" for s in combined)),
            ("duplicate tasks dropped", max(0, sum(s.status == "pass" for s in blue + combined)
                                            - len({s.labels.get("task") for s in trials})) if trials else 0),
            ("tasks", len({s.labels.get("task") for s in trials})),
            ("trajectories (trials)", len(trials)),
            ("successful trajectories", len(passed)),
            ("tasks with a success", len(solved)),
            ("unique successful trajectories", len(unique)),
            ("unique successful trajectories (kept)", len(kept)),
        ]
        return MetricResult(name=self.name, title="APIGen-MT funnel",
                            values={k: v for k, v in rows},
                            columns=[Column(key="stage", label="stage"), Column(key="n", label="n", kind="number")],
                            rows=[{"stage": k, "n": v} for k, v in rows])


class TaskOutcomesMetric(Metric):
    """One row per task: where it came from, its trials and passes, the unique successful
    trajectories kept and the mean number of user turns."""

    name = "tasks"

    def compute(self, data: Any) -> MetricResult:
        tasks: dict[Any, dict[str, Any]] = {}
        for _, s in data.scores("task"):
            t = tasks.setdefault(s.labels.get("task"), {"task": s.labels.get("task"),
                                 "blueprint": s.labels.get("blueprint"), "kind": s.labels.get("kind"),
                                 "trials": 0, "passed": 0, "unique": set(), "turns": [], "why": ""})
            t["trials"] += 1
            t["turns"].append(s.labels.get("turns") or 0)
            if s.status == "pass":
                t["passed"] += 1
                t["unique"].add(s.labels.get("signature"))
            elif s.note and not t["why"]:
                t["why"] = s.note
        rows = []
        for key in sorted(tasks, key=lambda k: (k is None, k)):
            t = tasks[key]
            rows.append(t | {"unique": len(t["unique"]),
                             "turns": round(sum(t["turns"]) / len(t["turns"]), 2) if t["turns"] else None})
        return MetricResult(
            name=self.name, title="Tasks", values={"tasks": len(rows)},
            columns=[Column(key="task", label="task", group=True), Column(key="blueprint", label="blueprint"),
                     Column(key="kind", label="kind"), Column(key="trials", label="trials", kind="number"),
                     Column(key="passed", label="passed", kind="number"),
                     Column(key="unique", label="unique successes", kind="number"),
                     Column(key="turns", label="mean user turns", kind="number"),
                     Column(key="why", label="first failure")],
            rows=rows)


METRICS = (AcceptanceMetric, FunnelMetric, TaskOutcomesMetric)
