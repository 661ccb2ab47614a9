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


WORKSPACE_OPTION = click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
                                show_default=True)


@click.command()
@click.argument("run", default="latest")
@click.option("--labels", "labels_path", type=click.Path(path_type=Path), required=True,
              help="People's labels: CSV or JSONL with item, violated (true/false) and the subject "
                   "column its judges declare (a rule's id), empty for the item's own outcome.")
@click.option("--by", default="category", show_default=True, help="The score label to group by.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (overall.kappa, "
              "overall.agreement, overall.n, every group).")
@WORKSPACE_OPTION
@STORE_OPTION
@click.pass_obj
def calibrate(obj: Context, run: str, labels_path: Path, by: str, as_json: bool, workspace: Path,
              store_url: str | None) -> None:
    """How RUN's judges agree with people's labels: agreement (95 % Wilson interval), Cohen's
    kappa (95 % interval from its large-sample standard error) and the confusion counts, overall
    and per group (a rule's category; the items' own outcomes apart). Kept with the run: its
    reports are written again with a Judges against people's labels section."""
    from intellagent.calibration import calibrate as agreement
    from intellagent.calibration import read_labels, subjects_of
    from intellagent.report import load_run

    store = _existing_workspace(workspace, store_url)
    run_id = store.resolve_run(run)
    plan, _, data = load_run(store, run_id, obj.registry)
    labels = read_labels(labels_path, set(subjects_of(plan)))
    found = agreement(data, labels, labels_path, by)
    store.update_run_config(run_id, calibration=found.model_dump(mode="json"))
    paths = rewrite_reports(store, run_id, obj, workspace)
    if as_json:
        click.echo(found.model_dump_json(indent=1))
        return
    click.echo(f"run {run_id}: {found.summary()}")
    width = max([len(g) for g in found.groups] + [7])
    for name, group in [("overall", found.overall), *found.groups.items()]:
        c = group.confusion
        click.echo(f"  {name:<{width}}  {group.text()}; both violated {c.both}, only the judge "
                   f"{c.judge_only}, only people {c.people_only}, neither {c.neither}")
    click.echo(f"  ({found.intervals})")
    for path in paths:
        click.echo(f"report: {path}")


@click.command()
@click.argument("run", default="latest")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="The page to write (default: label.html beside the run's report).")
@click.option("--limit", type=click.IntRange(1, 5000), default=100, show_default=True,
              help="Items on the page (the run's first).")
@WORKSPACE_OPTION
@STORE_OPTION
@click.pass_obj
def label(obj: Context, run: str, out: Path | None, limit: int, workspace: Path,
          store_url: str | None) -> None:
    """Write a labelling page for RUN: a static HTML file showing each dialog with a question per
    judgement, the judge's answer hidden until answered; it downloads the answers as a labels
    file for `intellagent calibrate`."""
    from intellagent.labelling import label_page
    from intellagent.report import load_run

    store = _existing_workspace(workspace, store_url)
    run_id = store.resolve_run(run)
    _, _, data = load_run(store, run_id, obj.registry)
    views = [c.value for c in obj.registry.components.get("view", {}).values()]
    folder = workspace / "runs" / (store.run_config(run_id).get("report_folder") or run_id)
    path = out or folder / "label.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(label_page(data, views, limit=limit), encoding="utf-8")
    click.echo(f"labelling page: {path}")


COMMANDS = (mutate, calibrate, label)
