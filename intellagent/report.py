"""The run report: what any pipeline's run says about itself, for reporters to render.

It holds the run's identity (pipeline, environment, models of every role, agent, seed), each
step's funnel (items and how they ended), every metric's result, and the cost. The items
themselves stay in the store; reporters stream them from :class:`~intellagent.results.RunData`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from intellagent.metrics import MetricResult
from intellagent.results import StepSummary


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


class RunReport(BaseModel):
    info: RunInfo
    steps: list[StepSummary]
    outcomes: dict[str, int] = Field(default_factory=dict, description="How the items of the "
                                     "first fan-out ended: each at the last step it reached.")
    metrics: dict[str, MetricResult] = Field(default_factory=dict)
    cost: list[dict[str, Any]] = Field(default_factory=list)

    def headlines(self) -> list[str]:
        return [m.headline for m in self.metrics.values() if m.headline]


def load_run(store: Any, run_id: str, registry: Any) -> tuple[Any, RunReport, Any]:
    """A finished run's plan, report (metrics recomputed from the store) and data."""
    from pathlib import Path

    from intellagent.errors import IntellagentError
    from intellagent.plan import plan_from_data
    from intellagent.results import RunData, outcomes, summarize

    config = store.run_config(run_id)
    if not config.get("info"):
        raise IntellagentError("this run did not finish; run it again to resume", item=run_id)
    plan = plan_from_data(config["spec"], Path(config.get("source", "pipeline.yaml")), registry)
    data = RunData(store, run_id, plan)
    metrics = {name: m.compute(data) for name, m in plan.metrics.items()}
    for name, result in metrics.items():
        result.name = name
    report = RunReport(info=RunInfo.model_validate(config["info"]), steps=summarize(data),
                       outcomes=outcomes(data), metrics=metrics, cost=store.cost_summary(run_id))
    return plan, report, data
