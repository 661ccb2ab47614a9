"""APIGen-MT's own metrics: blueprint acceptance with and without the feedback loop, the
method's funnel, and per-task outcomes (trials, passes, unique successful trajectories, turns).
Rejections by stage and reason, trajectory success, pass^k and average turns are the generic
``counts``, ``rate``, ``pass-hat-k`` and ``mean`` over this pipeline's scores."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, get_args

from intellagent.metrics import Column, GateValues, Metric, MetricResult, Rate
from intellagent_plugins.apigen_mt.artefacts import Stage

#: The funnel's rows before its ``rejected at STAGE`` ones (one per stage that rejected a
#: blueprint for good) and after them, each a value of the funnel a gate may name.
BLUEPRINT_ROWS = ("blueprints generated", "accepted at the first version", "accepted after revision")
TASK_ROWS = ("combined tasks attempted", "combined tasks accepted", "duplicate tasks dropped", "tasks",
             "trajectories (trials)", "successful trajectories", "tasks with a success",
             "unique successful trajectories", "unique successful trajectories (kept)")


def rejected_at(stage: Any) -> str:
    """The funnel's row of the blueprints a stage rejected for good."""
    return f"rejected at {stage}"


class AcceptanceMetric(Metric):
    """Share of blueprints accepted at their first version (no feedback loop) and after
    revision (with it), and the gain."""

    name = "acceptance"

    def values(self, plan: Any, env: Any) -> GateValues:
        return GateValues(own=["with", "without", "gain", "n"], per_group=[])

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

    def values(self, plan: Any, env: Any) -> GateValues:
        return GateValues(own=[*BLUEPRINT_ROWS, *map(rejected_at, get_args(Stage)), *TASK_ROWS], per_group=[])

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
        tasks = len({s.labels.get("task") for s in trials})
        dropped = max(0, sum(s.status == "pass" for s in blue + combined) - tasks) if trials else 0
        of_blueprints = (len(blue), first, sum(s.status == "pass" for s in blue) - first)
        of_tasks = (len(combined), sum(s.status == "pass" for s in combined), dropped, tasks, len(trials),
                    len(passed), len(solved), len(unique), len(kept))
        rows = [*zip(BLUEPRINT_ROWS, of_blueprints, strict=True),
                *[(rejected_at(stage), n) for stage, n in sorted(final.items())],
                *zip(TASK_ROWS, of_tasks, strict=True)]
        return MetricResult(name=self.name, title="APIGen-MT funnel",
                            values={k: v for k, v in rows},
                            columns=[Column(key="stage", label="stage"), Column(key="n", label="n", kind="number")],
                            rows=[{"stage": k, "n": v} for k, v in rows])


class TaskOutcomesMetric(Metric):
    """One row per task: where it came from, its trials and passes, the unique successful
    trajectories kept and the mean number of user turns."""

    name = "tasks"

    def values(self, plan: Any, env: Any) -> GateValues:
        """How many tasks (``tasks.tasks``), and a task's counts (``tasks.3.passed``); its tasks
        come from the model."""
        return GateValues(own=["tasks"], per_group=["trials", "passed", "unique", "turns"])

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
