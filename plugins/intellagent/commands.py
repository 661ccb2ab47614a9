"""``intellagent graph``: build (or reuse) an environment's policy graph and show it."""

from __future__ import annotations

from pathlib import Path

import click

from intellagent.errors import IntellagentError
from intellagent_plugins.intellagent.artefacts import PolicyGraph


@click.command("graph")
@click.argument("environment")
@click.option("--pipeline", default=None, help="Pipeline whose graph step to run (default: intellagent).")
@click.option("--model", default=None, help="Model for every role.")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True)
@click.pass_obj
def graph(obj, environment: str, pipeline: str | None, model: str | None, workspace: Path) -> None:
    """Build (or reuse) ENVIRONMENT's policy graph and show its policies and strongest edges."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.plan import load_plan, model_overrides
    from intellagent.runner import drive, run_plan
    from intellagent.store import Store

    registry = obj.registry
    plan = load_plan(pipeline, registry, overrides=model_overrides(model) if model is not None else None)
    step = next((s.name for s in plan.steps.values() if s.output.base is PolicyGraph
                 and not s.output.many), None)
    if step is None:
        raise IntellagentError("this pipeline has no step giving a policy graph", item="--pipeline")
    env = load_environment(environment_path(registry, environment))
    result = drive(run_plan(plan, env, store=Store.for_workspace(workspace),
                            registry=registry, workspace=workspace, until=step))
    g: PolicyGraph | None = result.data.value(step)
    if g is None:
        item = next(result.data.items(step))
        raise IntellagentError(f"no graph: {item.note} (run the command again to retry)", item=step)
    for warning in g.warnings:
        click.echo(f"warning: {warning}", err=True)
    if g.warnings:
        click.echo("warning: the graph is degraded; run the command again to ask the failed calls "
                   "again (what came through is kept)", err=True)
    click.echo(f"task: {g.task}")
    click.echo(f"flows: {', '.join(g.flows)}")
    for p in g.policies:
        click.echo(f"{p.id:<4} [{p.category}, challenge {p.challenge}] {p.text}")
    strongest = sorted(g.edges, key=lambda e: -e.weight)[:10]
    click.echo(f"{len(g.edges)} edges; strongest: " + ", ".join(f"{e.a}-{e.b} {e.weight:g}" for e in strongest))
