"""The commands that test the tests: ``mutate`` (which broken agents does the suite catch?),
``calibrate`` and ``label`` (do the judges agree with people?), ``replay`` (recorded dialogs
against another agent, the simulated user taking over where it departs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from intellagent.cli import (EXIT_UNFINISHED, STORE_OPTION, Context, RunInputs, _existing_workspace,
                             exit_code, run_options)
from intellagent.errors import IntellagentError


def rewrite_reports(store: Any, run_id: str, obj: Context, workspace: Path) -> list[Path]:
    """Write a finished run's reports again (with what was learnt about it since)."""
    from intellagent.report import load_run, write_reports

    plan, report, data = load_run(store, run_id, obj.registry)
    folder = store.run_config(run_id).get("report_folder")
    return write_reports(plan, report, data, workspace, obj.registry, folder=folder)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@run_options
@click.option("--mutants", default=None, metavar="NAMES", help="Mutants to run, comma-separated "
              "(default: every registered one: see `intellagent plugins`).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: each mutant's name → "
              "killed (item ids), kill_rate, its interval, what caught it.")
@click.pass_context
def mutate(ctx: click.Context, mutants: str | None, as_json: bool, **options: Any) -> None:
    """Run a pipeline on ENVIRONMENT as `run` does, then again with each mutant around the
    agent under test (a fault on the harness side: drop-writes, wrong-record, skip-lookup, leak,
    refuse-all), on the same items. Per mutant: the items it killed (they pass with the agent and
    fail with the mutant), the kill rate with its 95 % interval and what caught it; the suite's
    mutation score. Written into the agent's run report (report.json `mutation`, the HTML
    report's Mutants section). Exit 3 when a run could not finish, else 0."""
    from intellagent.mutation import mutant_result, mutation_report

    inputs = RunInputs(ctx, options)
    registry = inputs.registry
    names = [n.strip() for n in mutants.split(",") if n.strip()] if mutants else \
        sorted(registry.components["mutant"])
    if not names:
        raise IntellagentError("no mutant is registered", item="--mutants")
    components = []
    for name in names:
        try:
            components.append(registry.resolve("mutant", name))
        except IntellagentError as exc:
            raise IntellagentError(exc.message, item="--mutants") from None
    plan = inputs.plan()
    if plan.agent is None:
        raise IntellagentError(f"pipeline {plan.name} does not talk to an agent: nothing to mutate",
                               item="--mutants")
    say = (lambda line: None) if as_json else click.echo
    base = inputs.run(plan)
    say(f"agent as it is: run {base.run_id}: {sum(base.report.outcomes.values())} items ("
        + ", ".join(f"{v} {k}" for k, v in base.report.outcomes.items()) + ")")
    results, unfinished = [], exit_code(base.report) == EXIT_UNFINISHED
    for component in components:
        mutated_plan = inputs.plan()
        mutated_plan.mutant = component
        done = inputs.run(mutated_plan)
        unfinished |= exit_code(done.report) == EXIT_UNFINISHED
        result = mutant_result(component.display_name, getattr(component.value, "description", ""),
                               (base.report, base.data), (done.report, done.data))
        results.append(result)
        say(f"  {result.line()} (run {done.run_id})")
    found = mutation_report((base.report, base.data), results)
    inputs.store.update_run_config(base.run_id, mutation=found.model_dump(mode="json"))
    paths = rewrite_reports(inputs.store, base.run_id, ctx.obj, inputs.workspace)
    if as_json:
        click.echo(json.dumps({r.mutant: r.model_dump(mode="json", exclude={"mutant"}) for r in results},
                              indent=1, ensure_ascii=False))
    else:
        click.echo(found.summary())
        for path in paths:
            click.echo(f"report: {path}")
    sys.exit(EXIT_UNFINISHED if unfinished else 0)


COMMANDS = (mutate,)
