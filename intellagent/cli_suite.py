"""The commands that test the tests: ``mutate`` (which broken agents does the suite catch?),
``calibrate`` and ``label`` (do the judges agree with people?), ``replay`` (recorded dialogs
against another agent, the simulated user taking over where it departs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from intellagent.cli import (EXIT_UNFINISHED, STORE_OPTION, Context, RunInputs, exit_code, output_to,
                             refuse_unwritable_reports, report_elsewhere, report_folder, run_options,
                             unwritten_reports)
from intellagent.errors import IntellagentError, listed


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
    from intellagent.compare import compare
    from intellagent.mutation import mutant_result, mutation_report
    from intellagent.report import write_reports

    inputs = RunInputs(ctx, options)
    registry = inputs.registry
    if mutants is not None:
        names = [n.strip() for n in mutants.split(",") if n.strip()]
        if not names:
            raise IntellagentError("no mutant name given (e.g. --mutants drop-writes,leak)", item="--mutants")
    else:
        names = sorted(registry.components.get("mutant", {}))
        if not names:
            raise IntellagentError("no mutant is registered", item="--mutants")
    components: dict[str, Any] = {}  # by resolved name: a mutant named twice runs once
    for name in names:
        try:
            component = registry.resolve("mutant", name)
        except IntellagentError as exc:
            raise IntellagentError(exc.message, item="--mutants") from None
        components.setdefault(component.name, component)
    plan = inputs.plan()
    inputs.check(plan)
    if plan.agent is None:
        raise IntellagentError(f"pipeline {plan.name} does not talk to an agent: nothing to mutate",
                               item="--mutants")
    say = (lambda line: None) if as_json else click.echo
    # every run's reports are written at the end, the mutation result in the agent's: a report
    # folder it may not write then refuses nothing computed
    base = inputs.run(plan, reports=False)
    say(f"agent as it is: run {base.run_id}: {sum(base.report.outcomes.values())} items ("
        + ", ".join(f"{v} {k}" for k, v in base.report.outcomes.items()) + ")")
    results, unfinished = [], exit_code(base.report) == EXIT_UNFINISHED
    mutated = []
    for component in components.values():
        mutated_plan = inputs.plan()
        mutated_plan.mutant = component
        done = inputs.run(mutated_plan, reports=False)
        mutated.append((mutated_plan, done))
        unfinished |= exit_code(done.report) == EXIT_UNFINISHED
        pair = (base.report, base.data), (done.report, done.data)
        result = mutant_result(component.display_name, getattr(component.value, "description", ""),
                               *pair, compare(*pair).deltas)
        results.append(result)
        say(f"  {result.line()} (run {done.run_id})")
        for line in result.details():
            say(f"    {line}")
    found = mutation_report((base.report, base.data), results)
    store, workspace = inputs.store, inputs.workspace
    store.update_run_config(base.run_id, mutation=found.model_dump(mode="json"))
    paths, refused = [], None
    report = report_elsewhere(base.run_id, workspace, inputs.options["store_url"])
    instead = ("the runs and the mutation result are kept in the store; write the agent's report, with "
               f"it, elsewhere: {report}; a mutant's likewise, its run in place of {base.run_id}")
    try:  # the result is printed either way, the refusal after it
        with output_to(report_folder(store, base.run_id, workspace), None, instead=instead):
            paths = rewrite_reports(store, base.run_id, ctx.obj, workspace)
        for mutated_plan, done in mutated:
            folder = report_folder(store, done.run_id, workspace)
            with output_to(folder, None, instead=instead):
                write_reports(mutated_plan, done.report, done.data, workspace, inputs.registry,
                              folder=folder.name)
    except IntellagentError as exc:
        refused = exc
    if as_json:
        click.echo(json.dumps({r.mutant: r.model_dump(mode="json", exclude={"mutant"}) for r in results},
                              indent=1, ensure_ascii=False))
    else:
        click.echo(found.summary())
        for path in paths:
            click.echo(f"report: {path}")
    if refused is not None:
        raise refused
    sys.exit(EXIT_UNFINISHED if unfinished else 0)


WORKSPACE_OPTION = click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
                                show_default=True)


@click.command()
@click.argument("run", required=False)
@click.option("--labels", "labels_paths", type=click.Path(path_type=Path), required=True, multiple=True,
              help="People's labels: CSV or JSONL with item, violated (true/false) and the subject "
                   "column its judges declare (a rule's id), empty for the item's own outcome; run "
                   "(optional): the run they were made on; labeller (optional; else the file's stem). "
                   "Given again for more people's files (at most 20).")
@click.option("--by", default="category", show_default=True, help="The score label to group by.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (overall.kappa, "
              "overall.agreement, overall.n, every group).")
@click.option("--print-only", is_flag=True, help="Print the result and keep nothing: the store "
              "is only read and the run's reports are not written again (a workspace you may not "
              "write).")
@WORKSPACE_OPTION
@STORE_OPTION
@click.pass_obj
def calibrate(obj: Context, run: str | None, labels_paths: tuple[Path, ...], by: str, as_json: bool,
              print_only: bool, workspace: Path, store_url: str | None) -> None:
    """How RUN's judges agree with people's labels: agreement (95 % Wilson interval), Cohen's
    kappa (95 % interval from its large-sample standard error) and the confusion counts, overall
    and per group (a rule's category; the items' own outcomes apart); the judge's precision and
    recall on "violated" (95 % Wilson intervals) with the items where only one side says so,
    overall and per thing judged (a rule, the items' outcomes), the least reliable first; a row
    whose status says no judge looked is left out of every figure, counted and named. RUN:
    by default the run the labels name (the labelling page's download does), else the latest.
    Kept with the run (unless --print-only): its reports are written again with a Judges against
    people's labels section. Two labellers or more (--labels again, or a labeller column): the
    judge against people's majority per judgement (ties left out, counted), and people's
    agreement among themselves (Cohen's kappa for two, Fleiss' kappa for more)."""
    from intellagent.calibration import MAX_LABEL_FILES, MAX_LABELS
    from intellagent.calibration import calibrate as agreement
    from intellagent.calibration import label_rows, labelled_run, read_all_labels, subjects_of
    from intellagent.report import load_run
    from intellagent.store import ReadOnlyStore, open_existing

    try:
        store = open_existing(workspace, store_url, read_only=print_only)
    except ReadOnlyStore as exc:
        raise exc.instead("calibrate keeps its result with the run; give --print-only to print "
                          "it and keep nothing") from None
    if len(labels_paths) > MAX_LABEL_FILES:
        raise IntellagentError(f"{len(labels_paths)} labels files: at most {MAX_LABEL_FILES}", item="--labels")
    files, total = {}, 0
    for path in labels_paths:
        if path in files:
            raise IntellagentError(f"{path} given twice", item="--labels")
        files[path] = label_rows(path)
        total += len(files[path])
        if total > MAX_LABELS:
            raise IntellagentError(f"more than {MAX_LABELS} labels in all", item="--labels")
    named = None if run else next(((path, *found) for path, rows in files.items()
                                   if (found := labelled_run(rows)) is not None), None)
    if named is None:
        run_id = store.resolve_run(run or "latest")
    else:
        try:
            run_id = store.resolve_run(named[1])
        except IntellagentError:
            raise IntellagentError(f"labelled on run {named[1]}, which this workspace does not have "
                                   "(--workspace, --store)", file=named[0], line=named[2]) from None
    plan, _, data = load_run(store, run_id, obj.registry)
    labels = read_all_labels(files, set(subjects_of(plan)))
    found = agreement(data, labels, list(files) if len(files) > 1 else labels_paths[0], by)
    paths, refused = [], None
    if not print_only:
        store.update_run_config(run_id, calibration=found.model_dump(mode="json"))
        report = report_elsewhere(run_id, workspace, store_url)
        try:  # the figures are printed either way, the refusal after them
            with output_to(report_folder(store, run_id, workspace), None,
                           instead="the result is kept with the run; give --print-only to only print, "
                                   f"or write its reports elsewhere: {report}"):
                paths = rewrite_reports(store, run_id, obj, workspace)
        except IntellagentError as exc:
            refused = exc
    if as_json:
        click.echo(found.model_dump_json(indent=1))
    else:
        show_calibration(found, run_id, paths)
    if refused is not None:
        raise refused


def show_calibration(found: Any, run_id: str, paths: list[Path]) -> None:
    """calibrate's result in the terminal."""
    click.echo(f"run {run_id}: {found.summary()}")
    width = max([len(g) for g in found.groups] + [7])
    for name, group in [("overall", found.overall), *found.groups.items()]:
        c = group.confusion
        click.echo(f"  {name:<{width}}  {group.text()}; both violated {c.both}, only the judge "
                   f"{c.judge_only}, only people {c.people_only}, neither {c.neither}")
    if found.left_out:
        click.echo(f"  left out of every figure, as no judge looked: {listed(found.left_out, 10)}")
    if found.ties:
        click.echo(f"  left out of the judge's figures, as people split evenly: {listed(found.ties, 10)}")
    if found.people is not None:
        click.echo(f"  {found.people.text()}")
    click.echo(f"  ({found.intervals})")
    for line in found.precision_recall.lines():
        click.echo(line)
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
    file for `intellagent calibrate`. A judgement no judge looked at (a dialog the simulated
    user broke) or the judge could not decide (its call failed) is left out, and counted by
    why, as calibrate would count no answer on it."""
    from intellagent.labelling import label_page
    from intellagent.report import load_run
    from intellagent.store import open_existing

    store = open_existing(workspace, store_url)
    run_id = store.resolve_run(run)
    _, _, data = load_run(store, run_id, obj.registry)
    views = [c.value for c in obj.registry.components.get("view", {}).values()]
    path = out or report_folder(store, run_id, workspace) / "label.html"
    page = label_page(data, views, limit=limit)
    with output_to(path, None if out else "--out FILE"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page.html, encoding="utf-8")
    click.echo(f"labelling page: {path}")
    if page.left_out():
        click.echo(f"  {page.left_out()}")


def _recorded_environment(registry: Any, config: dict[str, Any], info: Any) -> Any:
    """The environment a run was made on, as it was: from where the run loaded it (else its
    registered name and the data and prompt its provenance names), refused when its content
    has changed since."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path

    source = config.get("environment_source")
    provenance = info.provenance
    if source is None:
        source = {"path": str(environment_path(registry, info.environment)),
                  "data": provenance.data.path if provenance and provenance.data else None,
                  "prompt": provenance.prompt.path if provenance and provenance.prompt else None}
    env = load_environment(**source)
    if provenance is not None and env.fingerprint() != provenance.environment_hash:
        raise IntellagentError(f"the environment of run {info.run_id} ({info.environment}, its data or "
                               "prompt) has changed since: a replay needs the world its dialogs were "
                               "recorded in", item="replay")
    return env


def _events_unchanged(recorded: Any, plan: Any) -> None:
    """A replay takes the recorded run's items before the agent (its events) as they were: the
    steps up to the first that talks to the agent must be the same in both plans."""
    talking = [name for name, step in plan.steps.items() if step.uses_agent]
    after = {name for name in plan.steps if any(t in plan.upstream(name) for t in talking)}
    if recorded.spec.environment != plan.spec.environment:  # else the recorded one ran, named as this one
        raise IntellagentError("a replay takes the recorded run's environment: it cannot change it (to "
                               "test another environment, run it there)", item="--set environment")
    if recorded.spec.seed != plan.spec.seed:
        raise IntellagentError("a replay takes the recorded run's events: it cannot change the seed",
                               item="--set seed")
    for name, step in plan.steps.items():
        if name in after:
            continue
        old = recorded.steps.get(name)
        models = [[plan.spec.llm.for_role(r).model_dump(mode="json"), recorded.spec.llm.for_role(r).model_dump(mode="json")]
                  for r in sorted(step.roles)]
        same = old is not None and old.use == step.use and old.version == step.version and \
            old.spec.model_dump(mode="json") == step.spec.model_dump(mode="json") and all(a == b for a, b in models)
        if not same:
            raise IntellagentError(f"a replay takes the recorded run's events: it cannot change step "
                                   f"'{name}' (only the agent, its models and the steps from "
                                   f"{', '.join(talking)} on)", item="--set")


@click.command()
@click.argument("run", default="latest")
@click.option("--agent", default=None, help="The agent to replay the dialogs against (its options "
              "with --set agent.with.KEY=VALUE; default: the recorded run's).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Set a value of the recorded run's pipeline: the agent, its models, the steps from "
                   "the dialogs on.")
@click.option("--text", "text", default="exact", show_default=True,
              help="How the agent's reply text is compared with the recorded one: exact (after "
                   "normalising case and white space), fuzzy[:N] (token-sort ratio ≥ N, 90), any "
                   "(only tool calls compared), or module:function (f(new, recorded) -> bool; one "
                   "that raises stops the replay with exit 2).")
@click.option("--no-cache", is_flag=True, help="Do not reuse cached model responses or agent turns "
              "from the dialogs on (the steps before them are the recorded run's all the same).")
@WORKSPACE_OPTION
@STORE_OPTION
@click.pass_obj
def replay(obj: Context, run: str, agent: str | None, settings: tuple[str, ...], text: str,
           no_cache: bool, workspace: Path, store_url: str | None) -> None:
    """Replay every dialog of RUN against another agent: its pipeline, environment, data, prompt
    and events are the recorded run's; the recorded user turns are sent as they were while the
    agent answers as the recorded one did (the same tool calls; the text by --text); at its first
    other answer the simulated user takes over. Per dialog: the agent's turn of departure and
    the new verdict; `intellagent compare RUN NEW` shows them too. Exit codes as `run`'s."""
    from intellagent.cli import _set_overrides
    from intellagent.compare import compare
    from intellagent.plan import plan_from_data
    from intellagent.replay import Recording, text_matcher
    from intellagent.report import RunInfo
    from intellagent.runner import drive, run_plan
    from intellagent.store import open_existing

    text_matcher(text)  # a matcher that cannot work is refused before anything runs
    registry = obj.registry
    store = open_existing(workspace, store_url, read_only=False)
    run_id = store.resolve_run(run)
    config = store.run_config(run_id)
    if not config.get("info"):
        raise IntellagentError("this run did not finish; run it again to resume, then replay it", item=run_id)
    info = RunInfo.model_validate(config["info"])
    source = Path(config.get("source", "pipeline.yaml"))
    # the recorded spec was checked when its run started (its paths may have come from that
    # run's command line): only this command's own --agent and --set are checked, as flags
    recorded_plan = plan_from_data(config["spec"], source, registry, trusted=True)
    overrides = ([("agent", {"use": agent}, "--agent")] if agent is not None else []) + _set_overrides(settings)
    plan = plan_from_data(config["spec"], source, registry, overrides=overrides, trusted=True)
    if not any(s.uses_agent and getattr(s.plugin, "replays", False) for s in plan.steps.values()):
        raise IntellagentError(f"no step of pipeline {plan.name} replays a recorded dialog (a step "
                               "that talks to the agent and declares replays = True, as the dialogue "
                               "kit's simulated users do)", item="replay")
    _events_unchanged(recorded_plan, plan)
    env = _recorded_environment(registry, config, info)
    refuse_unwritable_reports(workspace)
    recording = Recording(store, run_id, plan, text)
    # a report folder that cannot be written after all (the one a resumed replay rewrites), as
    # `run`: the run kept, said after its summary
    result = drive(run_plan(plan, env, store=store, registry=registry, workspace=workspace,
                            cache=False if no_cache else None, hooks=registry.pm, replay=recording,
                            keep_unwritten=True))
    report = result.report
    unwritten = unwritten_reports(result, store, workspace, store_url)
    from intellagent.report import load_run

    _, recorded_report, recorded_data = load_run(store, run_id, registry)
    found = compare((recorded_report, recorded_data), (report, result.data))
    followed = sum(1 for r in found.replayed if r.departed is None)
    click.echo(f"replay of run {run_id} as run {result.run_id}: {len(found.replayed)} dialog(s), "
               f"{followed} followed the recording to the end, {len(found.replayed) - followed} departed")
    for r in found.replayed:
        click.echo(f"  {r.line()}")
    for line in report.headlines():
        click.echo(f"  {line}")
    for path in result.paths:
        click.echo(f"report: {path}")
    click.echo(f"compare: intellagent compare {run_id} {result.run_id}")
    if unwritten is not None:
        raise unwritten
    sys.exit(exit_code(report))

