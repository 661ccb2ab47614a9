"""The ``intellagent`` command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from intellagent import __version__
from intellagent.errors import IntellagentError
from intellagent.registry import Registry, load_registry

BUILTIN_COMMANDS = ("envs", "plugins", "validate", "new-env", "schemas", "cost", "run", "graph",
                    "events", "simulate", "critique", "report", "import")


class Context:
    """What every command shares: the registry, built once and only when needed."""

    def __init__(self, plugins: tuple = (), entry_points: bool = True) -> None:
        self._plugins = plugins
        self._entry_points = entry_points
        self._registry: Registry | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = load_registry(entry_points=self._entry_points, plugins=self._plugins)
        return self._registry


class IntellagentGroup(click.Group):
    """Adds plugin commands, and turns bad input into one line and exit code 2."""

    def _context(self, ctx: click.Context) -> Context:
        if not isinstance(ctx.obj, Context):
            ctx.obj = Context(**(ctx.obj or {}))
        return ctx.obj

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        try:
            names += [c.value.name for c in self._context(ctx).registry.components["command"].values()]
        except IntellagentError:
            pass  # reported when a command runs
        return sorted(set(names))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        for component in self._context(ctx).registry.components["command"].values():
            if component.value.name == name:
                if name in BUILTIN_COMMANDS:
                    raise IntellagentError(f"plugin {component.provider} registers command "
                                           f"'{name}', which is built in")
                return component.value
        return None

    def invoke(self, ctx: click.Context) -> Any:
        self._context(ctx)
        try:
            return super().invoke(ctx)
        except IntellagentError as exc:
            _fail(exc)


def _fail(exc: IntellagentError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@click.group(cls=IntellagentGroup)
@click.version_option(__version__, prog_name="intellagent")
def cli() -> None:
    """Test conversational agents against policy-targeted simulated users."""


@cli.command()
@click.pass_obj
def envs(obj: Context) -> None:
    """List the installed environments."""
    components = obj.registry.components["environment"]
    if not components:
        click.echo("no environments installed")
        return
    width = max(len(n) for n in components)
    for name in sorted(components):
        c = components[name]
        click.echo(f"{name:<{width}}  {c.provider}  {c.value}")


@cli.command()
@click.pass_obj
def plugins(obj: Context) -> None:
    """List plugins: distribution, version, hooks implemented, names registered."""
    for info in obj.registry.plugins():
        dist = (f"{info.provider.distribution} {info.provider.version}"
                if info.provider.distribution else "(not installed)")
        click.echo(f"{dist}  {info.name}")
        click.echo(f"    hooks: {', '.join(info.hooks) or '-'}")
        for registered in info.registered:
            click.echo(f"    registers {registered}")


@cli.command()
@click.argument("target")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="Seed data folder to use instead of the environment's own.")
@click.pass_obj
def validate(obj: Context, target: str, data: Path | None) -> None:
    """Check an environment (registered NAME or folder PATH): tools match their specs, seed rows
    fit the schema and pass the validators. Given a pipeline YAML, check that its plugins exist,
    their options fit, and each stage consumes what earlier stages produce."""
    from intellagent.environment import check_environment, load_environment
    from intellagent.envs import environment_path

    path = Path(target)
    if path.is_file() and path.suffix in (".yaml", ".yml") and path.name != "environment.yaml":
        from intellagent.engine import load_pipeline

        pipeline = load_pipeline(path, obj.registry)
        chain = " → ".join(f"{slot} {stage.name}" for slot, stage in pipeline.stages.items())
        click.echo(f"ok: pipeline {path.name}: {chain}; agent {pipeline.spec.agent.use}")
        return
    env = load_environment(environment_path(obj.registry, target), data=data, strict=False)
    problems = check_environment(env)
    if problems:
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(2)
    parts = [f"{len(env.tools)} tools"]
    if env.db_schema is not None:
        parts.append(f"{len(env.db_schema.tables)} tables")
    parts.append(f"{len(env.validators)} validators")
    click.echo(f"ok: {env.name} {env.version} ({', '.join(parts)})")


@cli.command("new-env")
@click.argument("name", required=False)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=Path("."),
              show_default=True, help="Folder to create the project in.")
@click.option("--template", default="environment", show_default=True,
              help="Registered project template.")
@click.option("--update", "update_path", type=click.Path(path_type=Path), default=None,
              help="Re-apply the (newer) template to a project made earlier.")
@click.pass_obj
def new_env(obj: Context, name: str | None, directory: Path, template: str,
            update_path: Path | None) -> None:
    """Create a pip-installable environment project NAME from a template."""
    from intellagent import scaffold

    if update_path is not None:
        answers = scaffold.read_answers(update_path)
        component = obj.registry.resolve("env-template", answers.template)
        result = scaffold.update(update_path, Path(component.value))
        for rel in result.updated:
            click.echo(f"updated   {rel}")
        for rel in result.added:
            click.echo(f"added     {rel}")
        for rel in result.conflicts:
            click.echo(f"conflict  {rel} (you changed it; the template's version is in {rel}.new)")
        if not (result.updated or result.added or result.conflicts):
            click.echo("already up to date")
        return
    if not name:
        raise IntellagentError("give the environment's NAME (or --update PATH)", item="new-env")
    scaffold.check_name(name)
    component = obj.registry.resolve("env-template", template)
    dest = scaffold.create(component.name, Path(component.value), name, directory)
    click.echo(f"created {dest}")
    click.echo(f"next: pip install -e '{dest}[test]' && intellagent validate "
               f"{scaffold.default_answers(name)['package']}/{name}")


@cli.command()
@click.option("--check", is_flag=True, help="Exit 1 if schemas/ is out of date, writing nothing.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("schemas"), show_default=True)
def schemas(check: bool, out: Path) -> None:
    """Regenerate the JSON Schemas of the YAML files from the models."""
    from intellagent.schemas import stale_schemas, write_schemas

    if check:
        stale = stale_schemas(out)
        if stale:
            click.echo(f"out of date: {', '.join(stale)} (run `intellagent schemas`)", err=True)
            sys.exit(1)
        click.echo("schemas are up to date")
        return
    for path in write_schemas(out):
        click.echo(f"wrote {path}")


def _overrides(events: int | None, agent: str | None, seed: int | None,
               budget: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if events is not None:
        out["stages.sampler.with.events"] = events
    if agent is not None:
        out["agent"] = {"use": agent}
    if seed is not None:
        out["seed"] = seed
    if budget is not None:
        out["llm.budget_usd"] = budget
    return out


def pipeline_options(fn: Any) -> Any:
    """The options shared by ``run`` and the stage commands."""
    for option in reversed([
        click.argument("environment"),
        click.option("--pipeline", type=click.Path(path_type=Path), default=None,
                     help="Pipeline YAML (default: the built-in IntellAgent pipeline)."),
        click.option("--events", type=int, default=None, help="Number of events to sample."),
        click.option("--agent", default=None, help="Agent under test (openai-tools, http, python)."),
        click.option("--model", default=None, help="Model for every role, e.g. gpt-4o-mini or mock/schema."),
        click.option("--seed", type=int, default=None, help="Run seed (every random choice follows it)."),
        click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
                     show_default=True),
        click.option("--data", type=click.Path(path_type=Path), default=None,
                     help="Seed data folder to use instead of the environment's own."),
        click.option("--budget", type=float, default=None, help="Stop launching model calls past $."),
        click.option("--no-cache", is_flag=True, help="Do not reuse cached model responses."),
    ]):
        fn = option(fn)
    return click.pass_obj(fn)


def _run_until(obj: Context, until: str | None, environment: str, pipeline: Path | None,
               events: int | None, agent: str | None, model: str | None, seed: int | None,
               workspace: Path, data: Path | None, budget: float | None, no_cache: bool) -> Any:
    import asyncio

    from intellagent.engine import load_pipeline, run_pipeline
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.store import Store

    registry = obj.registry
    env = load_environment(environment_path(registry, environment), data=data)
    spec = load_pipeline(pipeline, registry, _overrides(events, agent, seed, budget))
    store = Store.for_workspace(workspace)
    return asyncio.run(run_pipeline(spec, env, store=store, registry=registry, workspace=workspace,
                                    model=model, cache=False if no_cache else None,
                                    hooks=registry.pm, until=until))


@cli.command()
@pipeline_options
def run(obj: Context, **options: Any) -> None:
    """Run the whole pipeline on ENVIRONMENT and write the reports. Running it again resumes:
    finished items are reused, no model call is repeated."""
    report, paths = _run_until(obj, None, **options)
    t = report.totals
    rate = "–" if report.success.rate is None else f"{report.success.rate:.0%}"
    click.echo(f"run {report.run_id}: {t.get('events', 0)} events, {t.get('pass', 0)} pass, "
               f"{t.get('fail', 0)} fail, success {rate}")
    for path in paths:
        click.echo(f"report: {path}")


@cli.command()
@pipeline_options
def events(obj: Context, **options: Any) -> None:
    """Extract, sample and generate ENVIRONMENT's events (stored for the later stages)."""
    report, _ = _run_until(obj, "generate", **options)
    for r in report.results:
        e = r.event
        click.echo(f"{e.id} {e.status:<11} complexity {e.spec.complexity:<3} "
                   f"{' '.join(e.spec.policies):<24} {(e.error or e.scenario)[:90]}")


@cli.command()
@pipeline_options
def simulate(obj: Context, **options: Any) -> None:
    """Everything up to the dialogs of ENVIRONMENT's events (reusing stored events)."""
    report, _ = _run_until(obj, "simulate", **options)
    for r in report.results:
        d = r.dialog
        if d is None:
            click.echo(f"{r.event.id} event-{r.event.status}")
            continue
        calls = sum(len(t.tool_calls) for t in d.turns)
        click.echo(f"{r.event.id} {d.stop_reason:<11} {len(d.turns)} turns, {calls} tool calls")


@cli.command()
@pipeline_options
def critique(obj: Context, **options: Any) -> None:
    """Everything up to the verdicts (reusing stored events and dialogs), without reports."""
    report, _ = _run_until(obj, "critique", **options)
    for r in report.results:
        reason = (r.verdict.reason if r.verdict else r.event.error) or ""
        click.echo(f"{r.event.id} {r.status:<15} {reason[:100]}")


@cli.command()
@click.argument("run", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True)
@click.option("--format", "formats", default="html,json,csv", show_default=True,
              help="Reporters to write, comma-separated.")
@click.pass_obj
def report(obj: Context, run: str, workspace: Path, formats: str) -> None:
    """Write RUN's reports again (e.g. in another format) from its stored results."""
    from intellagent.report import RunReport

    run_id = _existing_workspace(workspace).resolve_run(run)
    source = workspace / "runs" / run_id / "report.json"
    if not source.is_file():
        raise IntellagentError("this run has no report.json (it did not finish)", file=source)
    data = RunReport.model_validate_json(source.read_text(encoding="utf-8"))
    for name in [f.strip() for f in formats.split(",") if f.strip()]:
        reporter = obj.registry.resolve("stage", name).value(None)
        click.echo(f"report: {reporter.write(data, source.parent)}")


@cli.command()
@click.argument("environment")
@click.option("--pipeline", type=click.Path(path_type=Path), default=None)
@click.option("--model", default=None)
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True)
@click.pass_obj
def graph(obj: Context, environment: str, pipeline: Path | None, model: str | None,
          workspace: Path) -> None:
    """Build (or reuse) ENVIRONMENT's policy graph and show its policies and strongest edges."""
    import asyncio

    from intellagent.context import RunContext
    from intellagent.engine import load_pipeline
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.llm import LLM
    from intellagent.store import Store

    registry = obj.registry
    env = load_environment(environment_path(registry, environment))
    spec = load_pipeline(pipeline, registry)
    store = Store.for_workspace(workspace)
    run_id = store.start_run(environment=env.name, seed=spec.spec.seed)
    llm = LLM(spec.spec.llm, store=store, registry=registry, run_id=run_id, seed=spec.spec.seed,
              model=model)
    ctx = RunContext(env=env, llm=llm, store=store, seed=spec.spec.seed, run_id=run_id)

    async def build():
        try:
            return await spec.stages["extractor"].extract(ctx)
        finally:
            await llm.aclose()

    g = asyncio.run(build())
    click.echo(f"task: {g.task}")
    click.echo(f"flows: {', '.join(g.flows)}")
    for p in g.policies:
        click.echo(f"{p.id:<4} [{p.category}, challenge {p.challenge}] {p.text}")
    strongest = sorted(g.edges, key=lambda e: -e.weight)[:10]
    click.echo(f"{len(g.edges)} edges; strongest: " + ", ".join(f"{e.a}-{e.b} {e.weight:g}" for e in strongest))


@cli.command()
@click.argument("run", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True, help="Workspace folder holding intellagent.db.")
def cost(run: str, workspace: Path) -> None:
    """Cost and tokens of RUN (a run id, or latest) by stage and model."""
    store = _existing_workspace(workspace)
    run_id = store.resolve_run(run)
    rows = store.cost_summary(run_id)
    click.echo(f"run {run_id}")
    header = f"{'stage':<12} {'model':<24} {'calls':>6} {'cached':>6} {'failed':>6} " \
             f"{'prompt tok':>11} {'compl. tok':>11} {'cost $':>10}"
    click.echo(header)
    totals = {"calls": 0, "cached": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0,
              "cost_usd": 0.0}
    for r in rows:
        click.echo(f"{(r['stage'] or '-'):<12} {r['model']:<24} {r['calls']:>6} {r['cached']:>6} "
                   f"{r['failed']:>6} {r['prompt_tokens']:>11} {r['completion_tokens']:>11} "
                   f"{r['cost_usd']:>10.4f}")
        for k in totals:
            totals[k] += r[k]
    click.echo(f"{'total':<12} {'':<24} {totals['calls']:>6} {totals['cached']:>6} "
               f"{totals['failed']:>6} {totals['prompt_tokens']:>11} "
               f"{totals['completion_tokens']:>11} {totals['cost_usd']:>10.4f}")


@cli.group("import")
def import_() -> None:
    """Turn another project's benchmark into IntellAgent environments."""


@import_.command("tau-bench")
@click.argument("checkout", type=click.Path(path_type=Path))
@click.option("--domain", type=click.Choice(["airline", "retail", "all"]), default="all",
              show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("."), show_default=True)
def import_tau_bench(checkout: Path, domain: str, out: Path) -> None:
    """Make environment folders tau-airline and tau-retail from a τ-bench CHECKOUT: its data,
    policy and tasks with IntellAgent's faithful tools. Run its tasks with
    `intellagent run OUT/tau-airline --pipeline tau-bench`."""
    from intellagent.tau_import import DOMAINS, import_domain

    if not checkout.is_dir():
        raise IntellagentError("τ-bench checkout not found", file=checkout)
    for name in (DOMAINS if domain == "all" else [domain]):
        click.echo(f"created {import_domain(checkout, name, out)}")


def _existing_workspace(workspace: Path) -> Any:
    """The store of a workspace that must already exist (for commands that read runs)."""
    from intellagent.store import Store

    if not (workspace / "intellagent.db").is_file():
        raise IntellagentError("no intellagent.db here: not a workspace", file=workspace)
    return Store.for_workspace(workspace)


def main() -> None:
    """Console entry point. Unexpected errors are shown in one line unless INTELLAGENT_DEBUG=1."""
    try:
        cli.main(prog_name="intellagent", standalone_mode=True)
    except IntellagentError as exc:
        _fail(exc)
    except Exception as exc:  # pragma: no cover - a bug; keep the user's screen readable
        if os.environ.get("INTELLAGENT_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} "
                   "(set INTELLAGENT_DEBUG=1 for the traceback)", err=True)
        sys.exit(1)
