"""The run report: what any pipeline's run says about itself, for reporters to render.

It holds the run's identity (pipeline, environment, models of every role, agent, seed), each
step's funnel (items and how they ended), every metric's result, and the cost. The items
themselves stay in the store; reporters stream them from :class:`~intellagent.results.RunData`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from intellagent.calibration import CalibrationReport
from intellagent.errors import IntellagentError
from intellagent.gates import Gate, GateResult, evaluate
from intellagent.metrics import MetricResult
from intellagent.model import StrictModel
from intellagent.mutation import MutationReport
from intellagent.plan import plan_from_data
from intellagent.provenance import Provenance
from intellagent.results import RunData, StepSummary, outcomes, shortfalls, summarize
from intellagent.steps import DEGRADED, UNFINISHED, NoOptions


class Reporter:
    """Base class of reporters (registered with ``register_reporters``): ``write`` renders a
    run's report into ``folder`` and returns the file it wrote. ``Config`` is the options model
    (a pipeline's ``report: [{use: html, with: {...}}]``); ``views`` are the registered item
    views, for showing an artefact type instead of its JSON. A reporter may also have
    ``write_comparison(comparison, folder, runs, views)`` for ``intellagent compare`` (``runs``:
    both runs' data, A's then B's)."""

    kind = "reporter"
    name = ""
    filename = ""
    Config: type[StrictModel] = NoOptions

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def write(self, report: "RunReport", data: RunData, folder: Path, views: list[Any]) -> Path:
        raise NotImplementedError


class RunInfo(BaseModel):
    run_id: str
    pipeline: str
    description: str = ""
    environment: str
    environment_version: str = ""
    agent: str | None = None
    models: dict[str, str] = Field(default_factory=dict, description="Model of every role the "
                                                                     "pipeline declares.")
    seed: int
    status: str = "done"
    provenance: Provenance | None = Field(default=None, description="Everything that defines what "
                                          "was tested (None for runs made before it was recorded).")
    budget_left: str = Field(default="", description="What the run's budget left unspent (empty "
                             "without a budget).")
    budget_refused: str = Field(default="", description="The worst case (prompt and output cap, "
                                "re-asks included) of the first call the budget could not pay: the "
                                "least it must leave for that call (empty when none was refused).")
    reused: dict[str, dict[str, int]] = Field(default_factory=dict, description="Per step that talks "
                                              "to the agent: dialogs taken from earlier runs, by run.")
    notices: list[str] = Field(default_factory=list, description="What a reader must know about the "
                               "run's models before reading it, as their providers say it (a demo "
                               "model's answers are scripted, not a model's).")
    agent_cost_apart: bool = Field(default=False, description="The agent under test has no model "
                                   "role of the run (an HTTP, Python or A2A agent): any model calls "
                                   "it makes itself are not in the run's cost.")
    unpriced: list[str] = Field(default_factory=list, description="Models the run called with no "
                                "known price: their calls count as $0, so the run's cost is a "
                                "lower bound.")
    structured: dict[str, str] = Field(default_factory=dict, description="How each role's endpoint "
                                       "was asked for structured output (tools, json_schema, json): "
                                       "the configured mode, or what an `auto` probe picked.")

    def structured_text(self) -> str:
        """Roles by structured-output mode: ``json_schema (critic, extractor), tools (user)``."""
        by_mode: dict[str, list[str]] = {}
        for role, mode in sorted(self.structured.items()):
            by_mode.setdefault(mode, []).append(role)
        return ", ".join(f"{mode} ({', '.join(roles)})" for mode, roles in by_mode.items())

    def cost_note(self) -> str:
        """What the cost leaves out, for a reader of the report (empty when nothing is left out)."""
        parts = []
        if self.unpriced:
            parts.append(f"no known price for {', '.join(self.unpriced)}: "
                         f"{'its' if len(self.unpriced) == 1 else 'their'} calls count as $0, so the "
                         "cost is a lower bound; llm.prices gives a price")
        if self.agent_cost_apart:
            parts.append("any model calls the agent under test makes itself are not in it")
        return "; ".join(parts)


class RunReport(BaseModel):
    info: RunInfo
    steps: list[StepSummary]
    outcomes: dict[str, int] = Field(default_factory=dict, description="How the items of the "
                                     "first fan-out ended: each at the last step it reached.")
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    cost: list[dict[str, Any]] = Field(default_factory=list)
    gates: list[GateResult] = Field(default_factory=list, description="Each gate, its value and "
                                    "whether it held.")
    mutation: MutationReport | None = Field(default=None, description="What `intellagent mutate` "
                                            "found: the items each mutant of the agent killed.")
    shortfalls: list[str] = Field(default_factory=list, description="What the run did not make: "
                                  "steps whose items are none or fewer than half usable (with how "
                                  "to get a useful run), steps left with nothing to work on.")
    calibration: CalibrationReport | None = Field(default=None, description="How the run's "
                                                  "judges agree with people's labels (`intellagent "
                                                  "calibrate`), once there are labels.")

    @property
    def unfinished(self) -> int:
        """Items that could not finish (an infra error, a budget stop): a re-run retries them."""
        return sum(n for s in self.steps for k, n in s.statuses.items() if k in UNFINISHED)

    @property
    def finished(self) -> bool:
        """Whether the run finished whole, so its gates decide (else it exits 3 and a re-run
        finishes it): done, no item left unfinished, none degraded."""
        return self.info.status == "done" and not self.unfinished and not self.degraded()

    def headlines(self) -> list[str]:
        return [m.headline for m in self.metrics.values() if m.headline]

    def degraded(self) -> dict[str, int]:
        """Steps with degraded items (made without a model call that failed): step → how many."""
        return {s.name: s.statuses[DEGRADED] for s in self.steps if s.statuses.get(DEGRADED)}


def build_report(plan: Any, data: Any, info: RunInfo, store: Any,
                 steps: list[StepSummary] | None = None, gates: list[Gate] | None = None) -> RunReport:
    """A run's report from its items in the store: every metric recomputed, the funnel
    (``steps``, when the caller has it already), the outcomes and the cost. ``run`` and
    ``report`` both reduce a run through here."""
    metrics = {name: metric.compute(data) for name, metric in plan.metrics.items()}
    for name, result in metrics.items():
        result.name = name
    found = store.run_config(info.run_id)  # what was learnt about the run since: mutants, labels
    steps = steps if steps is not None else summarize(data)
    return RunReport(info=info, steps=steps, shortfalls=shortfalls(plan, steps),
                     outcomes=outcomes(data), metrics=metrics, cost=store.cost_summary(info.run_id),
                     gates=evaluate(plan.gates if gates is None else gates, metrics),
                     mutation=found.get("mutation"), calibration=found.get("calibration"))


def load_run(store: Any, run_id: str, registry: Any) -> tuple[Any, RunReport, Any]:
    """A finished run's plan, report (metrics recomputed from the store) and data."""
    config = store.run_config(run_id)
    if not config.get("info"):
        raise IntellagentError("this run did not finish; run it again to resume", item=run_id)
    plan = plan_from_data(config["spec"], Path(config.get("source", "pipeline.yaml")), registry,
                          trusted=True)
    data = RunData(store, run_id, plan)
    return plan, build_report(plan, data, RunInfo.model_validate(config["info"]), store), data


def write_reports(plan: Any, report: RunReport, data: Any, workspace: Path, registry: Any,
                  reporters: list[Any] | None = None, folder: str | None = None,
                  into: Path | None = None) -> list[Path]:
    """Write the reports into ``workspace/runs/FOLDER`` (the run's id unless it resumed
    another run: then that run's folder, rewritten), or into the folder ``into``."""
    folder_path = into or workspace / "runs" / (folder or report.info.run_id)
    folder_path.mkdir(parents=True, exist_ok=True)
    views = [c.value for c in registry.components.get("view", {}).values()]
    return [r.write(report, data, folder_path, views) for r in (reporters or plan.reporters)]
