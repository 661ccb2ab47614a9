"""The ``intellagent`` command line."""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import click

from intellagent import __version__
from intellagent.errors import NOT_WRITABLE, IntellagentError
from intellagent.registry import Registry, load_registry

LAZY_COMMANDS = {name: f"intellagent.cli_suite:{name}" for name in ("mutate", "calibrate", "label",
                                                                    "replay")}
BUILTIN_COMMANDS = ("envs", "plugins", "validate", "new-env", "schemas", "cost", "run", "report",
                    "compare", "mutate", "calibrate", "label", "replay", "store")
STORE_OPTION = click.option(
    "--store", "store_url", default=None, metavar="URL", help="The store's URL, e.g. "
    "postgresql://user@host/db (default: $INTELLAGENT_STORE, else the pipeline's store:, else "
    "intellagent.db in the workspace).")


NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 and later


class Context:
    """What every command shares: the registry, built once and only when needed."""

    def __init__(self, plugins: tuple = (), entry_points: bool = True, disable: tuple = (),
                 quiet_broken: bool = False, started: float | None = None) -> None:
        self._plugins = plugins
        #: when the command began: its process's start from the console entry point, else now
        #: (a command invoked in a process that was already running)
        self.started = started if started is not None else time.time()
        self._entry_points = entry_points
        self.disable = disable
        self.quiet_broken = quiet_broken  # `plugins` lists them itself
        self._registry: Registry | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = load_registry(entry_points=self._entry_points, plugins=self._plugins,
                                           disable=self.disable)
            if not self.quiet_broken:
                for broken in self._registry.pm.broken:
                    _warn(f"{broken.line()}; going on without it")
            for line in self._registry.deprecations:
                _warn(line)
            self._registry.on_deprecation = _warn
        return self._registry


class Seconds(click.FloatRange):
    """A number of seconds within bounds: click's FloatRange lets NaN through (no comparison
    with it is false)."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


def _warn(line: str) -> None:
    click.echo(f"warning: {line}", err=True)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises SIGINT, so it ends as Ctrl-C does (the run marked
    'interrupted', what was paid for kept, exit 3) instead of killing the process mid-write.
    Only where SIGTERM has its default action, in the main thread; restored after."""
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class IntellagentGroup(click.Group):
    """Adds plugin commands, and turns bad input into one line and exit code 2."""

    def _context(self, ctx: click.Context) -> Context:
        if not isinstance(ctx.obj, Context):
            ctx.obj = Context(**(ctx.obj or {}))
        return ctx.obj

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(super().list_commands(ctx)) + list(LAZY_COMMANDS)
        try:
            names += [c.value.name for c in self._context(ctx).registry.components["command"].values()]
        except IntellagentError:
            pass  # reported when a command runs
        return sorted(set(names))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        if name in LAZY_COMMANDS:  # built in, imported when asked for (click's lazy group)
            module, attribute = LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attribute)
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
        except OSError as exc:  # a path of the user's that cannot be read or written
            if exc.filename is None:
                raise
            error = IntellagentError(exc.strerror or type(exc).__name__, file=exc.filename)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):  # the machine, not the input
                error.exit_code = 3
            _fail(error)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Click's own, except that a usage error (an unknown option, a value out of its range)
        is one line like every other bad input, not click's usage block. A SIGTERM (a CI job
        cancelled, a container stopped) is taken as Ctrl-C: the run is left 'interrupted', exit 3."""
        try:
            with _terminate_as_interrupt():
                result = super().main(*args, standalone_mode=False, **kwargs)
        except NO_ARGS as exc:  # a bare `intellagent`: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            click.echo(f"error: {where}{' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort as exc:  # Ctrl-C (click's form of KeyboardInterrupt): the run could not finish
            if isinstance(exc.__cause__, EOFError):  # click's form of an EOFError too: a fault, not Ctrl-C
                raise exc.__cause__ from None
            click.echo("error: interrupted: run the same command again to go on where it stopped", err=True)
            sys.exit(3)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def _fail(exc: IntellagentError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@contextlib.contextmanager
def output_to(path: Path, flag: str | None, instead: str | None = None) -> Iterator[None]:
    """A command writing its output at ``path``: a place it may not write (a read-only workspace)
    is one line naming it and ``flag``, the option that writes elsewhere (None: the user chose
    the place), or ``instead``, what to do where a flag is not all."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in NOT_WRITABLE:
            raise
        raise cannot_write(exc, path, flag, instead) from None


def cannot_write(exc: OSError, path: Path, flag: str | None, instead: str | None = None) -> IntellagentError:
    """The one line for ``exc``, met writing at ``path`` (see :func:`output_to`)."""
    hint = f": {instead}" if instead else f": give {flag} to write elsewhere" if flag else ""
    return IntellagentError(f"cannot write here ({exc.strerror}){hint}", file=path)


def may_write(folder: Path) -> None:
    """Raise what writing into ``folder`` would meet (a file made and removed there, or in its
    nearest folder that exists when it is not made yet): checked before work that ends there."""
    import tempfile

    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    with tempfile.TemporaryFile(dir=folder):
        pass


def report_folder(store: Any, run_id: str, workspace: Path) -> Path:
    """Where run ``run_id``'s reports are written in ``workspace``."""
    return workspace / "runs" / (store.run_config(run_id).get("report_folder") or run_id)


def report_elsewhere(run_id: str, workspace: Path, store_url: str | None) -> str:
    """The command that writes run ``run_id``'s reports outside a folder one may not write (a
    store URL stands as a placeholder: it may hold a password)."""
    command = shlex.join(["intellagent", "report", run_id, "--workspace", str(workspace)])
    return command + (" --store URL --out DIR" if store_url else " --out DIR")


def refuse_unwritable_reports(workspace: Path) -> None:
    """Refuse, before it pays for anything, a run whose reports cannot be written into
    ``workspace``: one line naming its runs/ folder and what to do."""
    runs = workspace / "runs"
    with output_to(runs, None, instead="nothing was run, as the run writes its reports here: make "
                                       "it writable, or give --workspace a folder you may write"):
        may_write(runs)


def unwritten_reports(result: Any, store: Any, workspace: Path, store_url: str | None) -> IntellagentError | None:
    """The one line for a run whose report folder it found it may not write at the end (the
    run kept in the store, done), naming the command that writes its reports elsewhere; None
    when its reports were written."""
    if result.unwritten is None:
        return None
    return cannot_write(result.unwritten, report_folder(store, result.run_id, workspace), None,
                        "the run is kept in the store; write its reports elsewhere: "
                        + report_elsewhere(result.run_id, workspace, store_url))


@click.group(cls=IntellagentGroup)
@click.version_option(__version__, prog_name="intellagent")
@click.option("--disable-plugin", "disable", multiple=True, metavar="NAME",
              help="Skip an installed plugin (its entry point or distribution name); also "
                   "INTELLAGENT_DISABLE_PLUGINS=a,b.")
@click.pass_context
def cli(ctx: click.Context, disable: tuple[str, ...]) -> None:
    """Test conversational agents against policy-targeted simulated users."""
    if disable:
        ctx.obj.disable = tuple(ctx.obj.disable) + disable


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
    """List plugins: distribution, version, hooks implemented, names registered; and those that
    failed to import or were disabled."""
    obj.quiet_broken = True
    for broken in obj.registry.pm.broken:
        click.echo(f"{broken.distribution} {broken.version}  {broken.name}  BROKEN")
        click.echo(f"    failed to import {broken.value}: {broken.error}")
    for name in obj.registry.pm.disabled:
        click.echo(f"{name}  disabled")
    for info in obj.registry.plugins():
        dist = (f"{info.provider.distribution} {info.provider.version}"
                if info.provider.distribution else "(not installed)")
        click.echo(f"{dist}  {info.name}")
        click.echo(f"    hooks: {', '.join(info.hooks) or '-'}")
        for registered in info.registered:
            click.echo(f"    registers {registered}")


@cli.command()
@click.argument("target")
@click.option("--pipeline", default=None, help="Also check this pipeline (file or registered name; "
              "with --model or --set alone: the one run would use, intellagent).")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="Seed data folder to use instead of the environment's own.")
@click.option("--model", default=None, help="Model for every role (as run's --model).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Set any value of the pipeline (as run's --set).")
@click.pass_obj
def validate(obj: Context, target: str, pipeline: str | None, data: Path | None,
             model: str | None, settings: tuple[str, ...]) -> None:
    """Check an environment (registered NAME or folder PATH): tools match their specs, seed rows
    fit the schema and pass the validators. Given a pipeline (YAML file or registered name), or
    settings for one (``--model``, ``--set``: the pipeline ``run`` would use), check that its
    plugins exist, their options fit and every wire between steps type-checks; no model is called."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path, is_environment_folder
    from intellagent.plan import load_plan, model_overrides

    registry = obj.registry
    overrides = (model_overrides(model) if model is not None else []) + _set_overrides(settings)
    path = Path(target)
    is_pipeline_file = path.is_file() and path.suffix in (".yaml", ".yml") \
        and path.name != "environment.yaml"
    if is_pipeline_file or (not is_environment_folder(path) and _is_pipeline_name(registry, target)):
        _echo_plan(load_plan(target, registry, overrides=overrides))
        return
    env = load_environment(environment_path(registry, target), data=data, strict=False)
    _check_env(env)
    parts = [f"{len(env.tools)} tools"]
    if env.db_schema is not None:
        parts.append(f"{len(env.db_schema.tables)} tables")
    parts.append(f"{len(env.validators)} validators")
    if env.checks:
        parts.append(f"{len(env.checks)} rule checks")
    click.echo(f"ok: {env.name} {env.version} ({', '.join(parts)})")
    if pipeline is not None or overrides:  # --set/--model alone: checked on the pipeline run would use
        plan = load_plan(pipeline, registry, overrides=overrides)
        _same_environment(plan, registry, env)
        plan.check_environment(env)
        plan.check_gates(env)
        _echo_plan(plan)


def _same_environment(plan: Any, registry: Registry, env: Any) -> None:
    """A pipeline that names its environment (``environment:``) runs on that one only."""
    from intellagent.envs import environment_path

    named = plan.spec.environment
    if not named:
        return
    try:
        path = environment_path(registry, named)
    except IntellagentError as exc:
        raise plan.error(("environment",), exc.message) from None
    folder = path.parent if path.name == "environment.yaml" else path
    if folder.resolve() != Path(env.path).resolve():
        raise plan.error(("environment",), f"this pipeline is for environment '{named}', not "
                         f"'{env.name}' (drop environment: from the pipeline to run it on any)")


def _is_pipeline_name(registry: Registry, target: str) -> bool:
    try:
        registry.resolve("environment", target)
        return False
    except IntellagentError:
        pass
    try:
        registry.resolve("pipeline", target)
        return True
    except IntellagentError:
        return False


def _warn_unused_prices(plan: Any) -> None:
    """A warning naming the keys of ``llm.prices`` that price no model the pipeline calls (a typo)."""
    from intellagent.llm.prices import unused_prices

    unused = unused_prices(plan.spec.llm, plan.roles_used())
    if unused:
        click.echo(f"warning: {unused}", err=True)


def _echo_plan(plan: Any) -> None:
    _warn_unused_prices(plan)  # as a run of it says it
    click.echo(f"ok: pipeline {plan.name}: {plan.describe()}")
    if not plan.roles:
        click.echo("    model roles: none")
    for role, description in sorted(plan.roles.items()):
        settings = plan.spec.llm.for_role(role)
        where = f" at {settings.base_url}" if settings.base_url else ""
        click.echo(f"    model role {role}: {settings.model}{where} ({description})")


def _check_env(env: Any, *, one_line: bool = False) -> None:
    """Every problem of the environment (``validate``), or the first one with a count (``run``,
    which refuses to start on an environment ``validate`` would refuse)."""
    from intellagent.environment import check_environment

    problems = check_environment(env)
    if not problems:
        return
    if one_line:
        more = f" ({len(problems) - 1} more: `intellagent validate` lists them)" if len(problems) > 1 else ""
        click.echo(f"error: {problems[0]}{more}", err=True)
        sys.exit(2)
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    sys.exit(2)


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


def _extra_params(args: list[str]) -> dict[str, str]:
    """``--name value`` / ``--name=value`` pairs left over by click: the pipeline's params."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) < 3:
            raise IntellagentError(f"unexpected argument '{arg}'", item="run")
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(args):
                raise IntellagentError("needs a value", item=f"--{name}")
            value = args[i + 1]
            i += 1
        out[name] = value
        i += 1
    return out


def _set_overrides(settings: tuple[str, ...]) -> list[tuple[str, Any, str]]:
    from intellagent.plan import parse_value

    out = []
    for item in settings:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise IntellagentError("expected KEY=VALUE, e.g. --set steps.STEP.with.OPTION=VALUE",
                                   item=f"--set {item}")
        out.append((key.strip(), parse_value(value, f"--set {key.strip()}"), f"--set {key.strip()}"))
    return out


def _print_estimate(plan: Any, env: Any, workspace: Path, store_url: str | None,
                    until: str | None, cache: bool) -> None:
    """``run --estimate``: the estimate's table, from the workspace's earlier run where there is
    one (a workspace without a store is not created)."""
    from intellagent.estimate import earlier_figures, estimate_plan, plan_reuse
    from intellagent.runner import drive
    from intellagent.store import Store
    from intellagent.store import store_url as chosen_url

    steps = [s for s in plan.steps if s in set(plan.upstream(until))] if until else None
    url = chosen_url(store_url, plan.spec.store)  # as the run picks it, a bad one refused alike
    if url or (Path(workspace) / "intellagent.db").exists():  # read, never written nor migrated
        store = Store(url or f"sqlite:///{Path(workspace) / 'intellagent.db'}", read_only=True)
    else:  # no store yet: walked over an empty one, so the steps that call nothing give their lists
        store = Store("sqlite://")
    earlier = earlier_figures(plan, env, store)
    reuse = drive(plan_reuse(plan, env, store, steps=steps, cache=cache))
    found = estimate_plan(plan, env, earlier, steps=steps, reuse=reuse)
    _warn_unused_prices(plan)  # as the run says it
    click.echo(f"estimate of {plan.name} on {env.name} (no model called):")
    for line in found.lines():
        click.echo(f"  {line}")
    settings = plan.spec.llm
    for line in _budget_lines(settings, found):
        click.echo(f"  {line}")
    if settings.budget_usd is not None and found.unpriced and settings.budget_tokens is None:
        click.echo(f"  the dollar budget would refuse to start it: no known price for "
                   f"{', '.join(found.unpriced)} (llm.prices gives one; or give a token budget)")
    if not earlier:
        click.echo("  (a guess from the pipeline and the environment: a finished run of this "
                   "pipeline in the workspace makes it a measurement)")


def _budget_lines(settings: Any, found: Any) -> list[str]:
    """Whether the run's budgets (dollars, tokens) hold what the estimate says it spends."""
    out = []
    tokens = found.prompt_tokens + found.completion_tokens
    for budget, spend, name, given, show in (
            (settings.budget_usd, found.dollars, "budget", "${:g}", lambda v: f"${v:.4f}"),
            (settings.budget_tokens, tokens, "token budget", "{:,} tokens", lambda v: f"{v:,.0f} tokens")):
        if budget is None or spend is None:
            continue
        given = given.format(budget)
        if spend > budget:
            out.append(f"the {name} ({given}) would stop it at about {budget / spend:.0%} of its model "
                       f"calls (estimated {show(spend)})")
        else:
            out.append(f"the {name} ({given}) holds the estimated {show(spend)}")
    if out:
        out.append("(a call is launched only while the budget left holds its worst case, its prompt "
                   "and output cap: the last of it stays unspent)")
    return out


RUN_OPTIONS = [
    click.argument("environment"),
    click.option("--pipeline", default=None, help="Pipeline: a registered name (see `intellagent "
                 "plugins`) or a YAML file. Default: intellagent."),
    click.option("--agent", default=None, help="Agent under test (openai-tools, http, python, ...)."),
    click.option("--model", default=None, help="Model for every role, e.g. gpt-4o-mini or mock/schema."),
    click.option("--seed", type=int, default=None, help="Run seed (every random choice follows it)."),
    click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
                 show_default=True),
    click.option("--data", type=click.Path(path_type=Path), default=None,
                 help="Seed data folder to use instead of the environment's own."),
    click.option("--prompt", "prompt_file", type=click.Path(path_type=Path), default=None,
                 help="The agent's prompt file to use instead of the environment's own."),
    click.option("--budget", type=float, default=None, help="Dollars the run may spend: a call goes only if its worst case fits in what is left (0: only free calls)."),
    click.option("--no-cache", is_flag=True, help="Do not reuse cached model responses."),
    STORE_OPTION,
    click.option("--executor", default=None, help="How items are spread: local (default), processes "
                 "(one worker per core), ray."),
    click.option("--workers", type=int, default=None, help="Workers of the processes or ray executor."),
    click.option("--ray-address", default=None, help="The Ray cluster: auto or ray://HOST:PORT "
                 "(implies --executor ray)."),
    click.option("--new-report", is_flag=True, help="Write the report into a folder of its own even "
                 "when this run resumes an unfinished one (which otherwise rewrites that run's)."),
    click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
                 help="Set any value of the pipeline, e.g. --set llm.roles.agent.model=gpt-4o."),
    click.option("--fail-under", "fail_under", multiple=True, metavar="PATH=NUMBER",
                 help="A gate: exit 1 when the metric PATH (success, by-category.authentication) is "
                      "under NUMBER. Repeatable; adds to the pipeline's gates."),
]


def run_options(command: Any) -> Any:
    """The options of ``run`` (its pipeline's ``params:`` too), for the commands that run a
    pipeline the same way (``mutate``)."""
    for option in reversed(RUN_OPTIONS):
        command = option(command)
    return command


class RunInputs:
    """What a command running a pipeline read from its options: the plan (made afresh by
    :meth:`plan`, so each run of a command has its own), the gates, the environment, the store."""

    def __init__(self, ctx: click.Context, options: dict[str, Any]) -> None:
        from intellagent.environment import load_environment
        from intellagent.envs import environment_path
        from intellagent.plan import model_overrides

        self.options = options
        self._started: float | None = ctx.obj.started  # the command's, for its first run only
        self.registry: Registry = ctx.obj.registry
        self.params = _extra_params(ctx.args)
        o = options
        overrides: list[tuple[str, Any, str]] = []
        if o["agent"] is not None:
            overrides.append(("agent", {"use": o["agent"]}, "--agent"))
        if o["seed"] is not None:
            overrides.append(("seed", o["seed"], "--seed"))
        if o["budget"] is not None:
            overrides.append(("llm.budget_usd", o["budget"], "--budget"))
        if o["executor"] is not None or o["ray_address"] is not None:
            overrides.append(("executor", {"use": o["executor"] if o["executor"] is not None else "ray"},
                              "--executor"))
        if o["ray_address"] is not None:
            overrides.append(("executor.with.address", o["ray_address"], "--ray-address"))
        if o["workers"] is not None:
            overrides.append(("executor.with.workers", o["workers"], "--workers"))
        if o["model"] is not None:  # before --set, so --set llm.roles.agent.model=... wins over it
            overrides += model_overrides(o["model"])
        overrides += _set_overrides(o["settings"])  # after --agent, so --set agent.with.x=... refines it
        self.overrides = overrides
        plan = self.plan()
        self.plan_steps = list(plan.steps)
        self.gates = self._gates(plan)
        self.env = load_environment(environment_path(self.registry, o["environment"]), data=o["data"],
                                    prompt=o["prompt_file"])
        _same_environment(plan, self.registry, self.env)
        _check_env(self.env, one_line=True)
        self.workspace: Path = o["workspace"]
        self._store_default = plan.spec.store
        self._store: Any = None

    @property
    def store(self) -> Any:
        """The store (opened, and a workspace made, only when a command runs)."""
        from intellagent.store import open_store

        if self._store is None:
            self._store = open_store(self.workspace, self.options["store_url"], self._store_default)
        return self._store

    def plan(self) -> Any:
        from intellagent.plan import load_plan

        return load_plan(self.options["pipeline"], self.registry, overrides=self.overrides,
                         params=self.params)

    def check(self, plan: Any, until: str | None = None, *, credentials: bool = True) -> dict[str, list[str]]:
        """Refuse, before the store is made, what the steps (up to ``until``) cannot run with:
        the environment's tools and tables, a gate's group the run cannot have, the models'
        providers. ``credentials=False``: a missing API key (or a real model while offline) is
        returned, not refused."""
        steps = plan.upstream(until) if until else None
        plan.check_environment(self.env, steps)
        plan.check_gates(self.env, self.gates)
        return plan.check_providers(self.registry, steps, credentials=credentials)

    def _gates(self, plan: Any) -> list[Any]:
        from intellagent.gates import fail_under as fail_under_gate
        from intellagent.gates import gate_problem

        gates = list(plan.gates)
        for text in self.options["fail_under"]:
            gate = fail_under_gate(text)
            problem = gate_problem(gate, plan.metrics)
            if problem:
                raise IntellagentError(problem, item=f"--fail-under {text}")
            gates.append(gate)
        return gates

    def run(self, plan: Any, *, until: str | None = None, progress_stream: Any = None,
            reports: bool = True, keep_unwritten: bool = False) -> Any:
        """Run ``plan`` (one of :meth:`plan`'s) with the options given (``reports`` False: its
        reports are not written, the caller writes them; ``keep_unwritten``: a report folder it
        may not write is in the result, the run kept)."""
        from intellagent.progress import DEFAULT_EVERY
        from intellagent.runner import drive, run_plan

        started, self._started = self._started, None
        return drive(run_plan(plan, self.env, store=self.store, registry=self.registry,
                              workspace=self.workspace,
                              cache=False if self.options["no_cache"] else None,
                              hooks=self.registry.pm, until=until,
                              new_report=self.options["new_report"], gates=self.gates,
                              progress_stream=progress_stream,
                              progress_every=self.options.get("progress_every", DEFAULT_EVERY),
                              quiet=self.options.get("quiet", False),
                              otel=self.options.get("otel"), started=started,
                              reports=reports, keep_unwritten=keep_unwritten))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@run_options
@click.option("--until", default=None, help="Stop after this step (and the steps it needs); no report.")
@click.option("--estimate", is_flag=True, help="Print what the run would cost (per step: items, "
              "model calls, tokens, dollars; a wall-time range) and stop, calling no model and no "
              "agent; refined by the workspace's latest finished run of the same pipeline.")
@click.option("--progress-every", type=Seconds(0.1, 86400), default=30.0, show_default=True,
              metavar="SECONDS", help="Without a terminal (a CI log, nohup): a line of progress "
              "every SECONDS.")
@click.option("--quiet", is_flag=True, help="Print only the summary: no progress, no table of steps.")
@click.option("--otel", default=None, metavar="URL", help="Export traces over OTLP/HTTP to this "
              "collector (its base URL, e.g. http://localhost:4318; needs intellagent[otel]). "
              "Also on with OTEL_EXPORTER_OTLP_ENDPOINT.")
@click.pass_context
def run(ctx: click.Context, until: str | None, estimate: bool, **options: Any) -> None:
    """Run a pipeline on ENVIRONMENT and write its reports; prints their paths. Running the
    same command again resumes: finished items are reused, no model call is repeated. Options
    a pipeline declares under `params:` are accepted too (the intellagent pipeline: --events N).
    Exit codes: 0 every gate held, 1 a gate failed, 2 bad input, 3 the run could not finish
    (items left with infra errors, the budget spent)."""
    if options["otel"] is not None:
        _check_otel(options["otel"])
    inputs = RunInputs(ctx, options)
    if until is not None and until not in inputs.plan_steps:
        raise IntellagentError(f"no step named '{until}' (steps: {', '.join(inputs.plan_steps)})",
                               item="--until")
    plan = inputs.plan()
    missing = inputs.check(plan, until, credentials=not estimate)  # before the store is made
    if estimate:  # calls no model: needs no key, but says what the run will need
        _print_estimate(plan, inputs.env, inputs.workspace, options["store_url"], until,
                        cache=not options["no_cache"])
        for message, roles in missing.items():
            click.echo(f"  the run itself would stop: {message} (role{'s' if len(roles) > 1 else ''} "
                       f"{', '.join(roles)})")
        return
    if until is None:  # a run whose reports cannot be written is refused before it pays for anything
        inputs.store  # a store it may not write is refused first, as every command refuses it
        refuse_unwritable_reports(inputs.workspace)
    # a report folder that cannot be written after all (the one a resumed run rewrites): the
    # run kept, said after its summary
    result = inputs.run(plan, until=until, keep_unwritten=True)
    report = result.report
    if report is None:
        from intellagent.results import summarize

        click.echo(f"run {result.run_id}: stopped after step {until}")
        ran = set(plan.upstream(until))
        for s in summarize(result.data):
            if s.name not in ran:
                continue
            statuses = ", ".join(f"{v} {k}" for k, v in sorted(s.statuses.items()))
            click.echo(f"  {s.name}: {s.items} items ({statuses or 'none'})")
        return
    unwritten = unwritten_reports(result, inputs.store, inputs.workspace, inputs.options["store_url"])
    outcomes = ", ".join(f"{v} {k}" for k, v in report.outcomes.items())
    click.echo(f"run {report.info.run_id}: {sum(report.outcomes.values())} items"
               + (f" ({outcomes})" if outcomes else ""))
    for notice in report.info.notices:
        click.echo(f"  {notice}")
    for line in report.shortfalls:
        click.echo(f"  {line}")
    for line in report.headlines():
        click.echo(f"  {line}")
    for line in _agent_lines(report):
        click.echo(f"  {line}")
    for s in report.steps:
        for warning, n in s.warnings.items():
            click.echo(f"  warning: {n} {s.name} item(s): {warning}")
    if report.info.structured:
        click.echo(f"  structured output: {report.info.structured_text()}")
    if note := report.info.cost_note():
        click.echo(f"  cost: {note}")
    if report.info.budget_left:
        refused = report.info.budget_refused
        click.echo(f"  budget: {report.info.budget_left} left unspent" + (
            f"; the next call could cost {refused} (its prompt and output cap, re-asks included), "
            "more than was left" if refused else ""))
    for gate in report.gates:
        click.echo(f"  {gate.line(report.finished)}")
    from intellagent.steps import DEGRADED

    retried: dict[str, int] = {}  # statuses a re-run can fix
    for s in report.steps:
        for k, n in s.statuses.items():
            if k in RETRIED:
                # an infra error at a prompt over the model's context fails the same way again
                n -= s.over_context.get(k, 0)
                if n > 0:
                    retried[k] = retried.get(k, 0) + n
    over = {s.name: sum(s.over_context.values()) for s in report.steps if s.over_context}
    if over:
        made = sum(s.over_context.get(DEGRADED, 0) for s in report.steps)
        click.echo(f"  {sum(over.values())} item(s) could not finish{' or were made degraded' if made else ''} at "
                   "a prompt longer than its model's context (" + ", ".join(f"{step} {n}" for step, n in over.items())
                   + "; see the report): running again fails the same way; a model with a longer "
                     "context, or shorter prompts (fewer turns: a smaller max_turns where a step has "
                     "one), can fix them")
    if report.info.status != "done":
        click.echo(f"  run status: {report.info.status}")
    elif retried:
        click.echo(f"  {sum(retried.values())} item(s) could not finish ("
                   + ", ".join(f"{n} {k}" for k, n in sorted(retried.items()))
                   + "; see the report); run the same command again to retry them: a re-run can fix "
                   + " and ".join(f"{k} ({RETRIED[k]})" for k in sorted(retried))
                   + ", and reuses every finished item")
    over_degraded = {s.name: s.over_context.get(DEGRADED, 0) for s in report.steps}  # told above
    degraded = {step: n - over_degraded[step] for step, n in report.degraded().items() if n > over_degraded[step]}
    if degraded:
        click.echo(f"  {sum(degraded.values())} item(s) degraded ("
                   + ", ".join(f"{step} {n}" for step, n in degraded.items())
                   + "): made without a model call that failed and used by this run as they are; "
                     "run the same command again to make them whole")
    for path in result.paths:
        click.echo(f"report: {path}")
    if unwritten is not None:
        raise unwritten
    sys.exit(exit_code(report))


def _check_otel(url: str) -> None:
    """``--otel``: an http(s) URL, and the packages that export traces installed."""
    import importlib.util
    from urllib.parse import urlparse

    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise IntellagentError("expected the collector's OTLP/HTTP base URL, e.g. "
                               "http://localhost:4318", item=f"--otel {url}")
    if importlib.util.find_spec("opentelemetry.sdk") is None or \
            importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise IntellagentError("traces need the otel extra: pip install 'intellagent[otel]'",
                               item="--otel")


#: The exit codes of ``run`` (docs/ci.md).
EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT, EXIT_UNFINISHED = 0, 1, 2, 3


def exit_code(report: Any) -> int:
    """3 when the run could not finish or has degraded items (then its gates say nothing: a
    re-run makes them whole), else 1 when a gate failed."""
    if not report.finished:
        return EXIT_UNFINISHED
    return EXIT_GATE if any(not g.held for g in report.gates) else EXIT_OK


def _agent_lines(report: Any) -> list[str]:
    """What the summary says of the agent under test: what it is, which dialogs were reused and
    from where, and the items that could not reach it, by cause."""
    info = report.info
    agent = info.provenance.agent if info.provenance else None
    lines = []
    if agent is not None:
        what = f"agent: {agent.use}" + (f" {agent.endpoint}" if agent.endpoint else "")
        if agent.identity is None:
            what += " (a black box: its dialogs are made anew each run; give it a version to reuse them)"
        elif agent.identity.startswith("version:"):
            what += f" ({agent.identity.replace(':', ' ', 1)})"
        lines.append(what)
    for step, sources in info.reused.items():
        names = {run: "an earlier run" if run == "earlier" else f"run {run}" for run in sources}
        if len(sources) == 1:
            lines.append(f"{step}: {sum(sources.values())} reused from {next(iter(names.values()))}")
        else:
            lines.append(f"{step}: {sum(sources.values())} reused (" + ", ".join(
                f"{n} from {names[run]}" for run, n in sources.items()) + ")")
    causes: dict[str, int] = {}
    for s in report.steps:
        for note, n in s.notes.items():
            if note.startswith("agent unreachable"):
                cause = note.partition("(")[2].rstrip(")") or "unknown"
                causes[cause] = causes.get(cause, 0) + n
    if causes:
        lines.append(f"{sum(causes.values())} item(s) could not reach the agent: "
                     + ", ".join(f"{cause} ×{n}" for cause, n in sorted(causes.items(), key=lambda kv: -kv[1]))
                     + "; they are retried by the next run")
    return lines


@cli.command()
@click.argument("run", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True)
@click.option("--format", "formats", default=None,
              help="Reporters to write, comma-separated (default: the pipeline's).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Folder to write the reports into (default: the run's folder under the "
                   "workspace's runs/).")
@STORE_OPTION
@click.pass_obj
def report(obj: Context, run: str, workspace: Path, formats: str | None, out: Path | None,
           store_url: str | None) -> None:
    """Write RUN's reports again from the store (e.g. in another format, or after changing a
    reporter or a metric plugin); the store is only read."""
    from intellagent.report import load_run
    from intellagent.report import write_reports
    from intellagent.store import open_existing

    registry = obj.registry
    store = open_existing(workspace, store_url)
    plan, rebuilt, data = load_run(store, store.resolve_run(run), registry)
    reporters = plan.reporters
    if formats is not None:
        names = [f.strip() for f in formats.split(",") if f.strip()]
        if not names:
            known = ", ".join(sorted(c.short_name for c in registry.components["reporter"].values()))
            raise IntellagentError(f"names no reporter (reporters: {known})", item="--format")
        reporters = []
        for name in names:
            try:
                component = registry.resolve("reporter", name)
            except IntellagentError as exc:
                raise IntellagentError(exc.message, item="--format") from None
            # the pipeline's own reporter of that name keeps its options
            reporters.append(next((r for r in plan.reporters if type(r) is component.value), None)
                             or component.value(None))
    folder = store.run_config(rebuilt.info.run_id).get("report_folder")
    target = out or workspace / "runs" / (folder or rebuilt.info.run_id)
    with output_to(target, None if out else "--out FOLDER"):
        paths = write_reports(plan, rebuilt, data, workspace, registry, reporters, folder=folder, into=out)
    for path in paths:
        click.echo(f"report: {path}")


@cli.command()
@click.argument("run_a")
@click.argument("run_b", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True)
@click.option("--changes", type=click.IntRange(0, 100_000), default=20, show_default=True,
              help="Item changes to list.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a rate of B is worse than "
              "A's and the 95 % interval of the difference excludes 0.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Folder to write compare-A-B.html into (default: the workspace's runs/).")
@STORE_OPTION
@click.pass_obj
def compare(obj: Context, run_a: str, run_b: str, workspace: Path, changes: int,
            fail_on_regression: bool, out: Path | None, store_url: str | None) -> None:
    """Compare two runs (e.g. two agents, or two versions of one, on the same events): what
    differs in what they tested, items reused, outcome changes per item, every rate's change
    with a 95 % interval; also written as compare-A-B.html beside the runs (or into --out)."""
    from intellagent.compare import compare as make
    from intellagent.report import load_run
    from intellagent.store import open_existing

    registry = obj.registry
    store = open_existing(workspace, store_url)
    ids = [store.resolve_run(r) for r in (run_a, run_b)]
    (_, report_a, data_a), (plan_b, report_b, data_b) = (load_run(store, i, registry) for i in ids)
    result = make((report_a, data_a), (report_b, data_b))
    folder = out or workspace / "runs"
    views = [c.value for c in registry.components.get("view", {}).values()]
    # written before a line is printed: a refusal (exit 2) never follows a result it contradicts
    with output_to(folder, None if out else "--out FOLDER"):
        pages = [writer(result, folder, (data_a, data_b), views) for writer in
                 (getattr(r, "write_comparison", None) for r in plan_b.reporters) if writer is not None]
    for label, info in (("A", result.a), ("B", result.b)):
        models = ", ".join(f"{r}: {m}" for r, m in info.models.items())
        click.echo(f"{label} {info.run_id}: {info.pipeline} on {info.environment}, agent "
                   f"{info.agent or '-'}; {models}")
    if result.differences:
        click.echo("what differs in what was tested (A → B):")
        for line in result.differences:
            click.echo(f"  {line}")
    elif not result.unknown:
        click.echo("what was tested is the same in both runs")
    for line in result.unknown:
        click.echo(line)
    click.echo("reused from A: " + ", ".join(f"{s} {same}/{n}" for s, (same, n) in result.shared.items()))
    click.echo(f"outcome changed for {len(result.changes)} item(s)"
               + (": " + ", ".join(f"{v}× {k}" for k, v in result.transitions.items()) if result.changes else ""))
    for change in result.changes[:changes]:
        click.echo(f"  {change.item}: {change.a} → {change.b}")
    if result.replayed:
        followed = sum(1 for r in result.replayed if r.departed is None)
        click.echo(f"B replayed A's dialogs: {followed} of {len(result.replayed)} followed the recording to "
                   "the end; per dialog, where the agent departed and the outcome A → B:")
        for r in result.replayed[:changes]:
            click.echo(f"  {r.line()}")
    for delta in result.deltas:
        group = ", ".join(f"{k} {v}" for k, v in delta.group.items())
        click.echo(f"{delta.metric}{' [' + group + ']' if group else ''}: {delta.text()}")
    for page in pages:
        click.echo(f"report: {page}")
    regressions = [d for d in result.deltas if d.regressed]
    if fail_on_regression:
        for d in regressions:
            group = ", ".join(f"{k} {v}" for k, v in d.group.items())
            click.echo(f"regression: {d.metric}{' [' + group + ']' if group else ''}: {d.text()}")
        click.echo(f"{len(regressions)} regression(s) whose 95 % interval excludes no change")
        if regressions:
            sys.exit(EXIT_GATE)


@cli.command()
@click.argument("run", default="latest")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True, help="Workspace folder holding intellagent.db.")
@STORE_OPTION
def cost(run: str, workspace: Path, store_url: str | None) -> None:
    """Cost and tokens of RUN (a run id, or latest) by step and model: every call its results
    took, including calls made before a resume or for items it reused."""
    from intellagent.store import open_existing

    store = open_existing(workspace, store_url)
    run_id = store.resolve_run(run)
    rows = store.cost_summary(run_id)
    click.echo(f"run {run_id}")
    info = store.run_config(run_id).get("info") or {}
    if info.get("structured"):
        from intellagent.report import RunInfo

        click.echo(f"structured output: {RunInfo.model_validate(info).structured_text()}")
    header = f"{'step':<12} {'model':<24} {'calls':>6} {'cached':>6} {'failed':>6} " \
             f"{'prompt tok':>11} {'of which':>9} {'compl. tok':>11} {'cost $':>10} {'request s':>9} " \
             f"{'queued s':>9}"
    click.echo(header)
    totals = {"calls": 0, "cached": 0, "failed": 0, "prompt_tokens": 0, "cached_tokens": 0,
              "completion_tokens": 0, "cost_usd": 0.0}

    def seconds(ms: float | None) -> str:
        return "–" if ms is None else f"{ms / 1000:.2f}"

    for r in rows:
        click.echo(f"{(r['stage'] or '-'):<12} {r['model']:<24} {r['calls']:>6} {r['cached']:>6} "
                   f"{r['failed']:>6} {r['prompt_tokens']:>11} {r['cached_tokens']:>9} "
                   f"{r['completion_tokens']:>11} "
                   f"{r['cost_usd']:>10.4f} {seconds(r['request_ms']):>9} {seconds(r['queue_ms']):>9}")
        for k in totals:
            totals[k] += r[k]
    click.echo(f"{'total':<12} {'':<24} {totals['calls']:>6} {totals['cached']:>6} "
               f"{totals['failed']:>6} {totals['prompt_tokens']:>11} {totals['cached_tokens']:>9} "
               f"{totals['completion_tokens']:>11} {totals['cost_usd']:>10.4f}")
    if info.get("unpriced") or info.get("agent_cost_apart"):
        from intellagent.report import RunInfo

        click.echo(f"({RunInfo.model_validate(info).cost_note()})")
    click.echo("(of which: prompt tokens the provider read from its prompt cache, priced at its cached "
               "rate; request s: mean seconds from a request to its answer, retries included; queued s: "
               "mean seconds waiting for a concurrency slot or the rate limits before it)")
    here = store.cost_summary(run_id, made_here=True)
    paid = sum(r["cost_usd"] for r in here)
    made = sum(r["calls"] - r["cached"] for r in here)
    click.echo(f"(what the run's results took, across resumes and reused items; this run itself "
               f"made {made} call(s) for ${paid:.4f})")


@cli.group()
def store() -> None:
    """The workspace store."""


@store.command("check")
@click.option("--workspace", type=click.Path(path_type=Path), default=Path("workspace"),
              show_default=True, help="Workspace folder holding intellagent.db.")
@STORE_OPTION
def store_check(workspace: Path, store_url: str | None) -> None:
    """Check the store: its schema is one this version knows (migrated if older, where the store
    may be written), every table and column is there, and (SQLite) the file passes SQLite's full
    integrity check. One line per problem and exit 2, or what it holds."""
    from intellagent.store import ReadOnlyStore, Store, safe_url
    from intellagent.store import store_url as chosen_url

    url = chosen_url(store_url)
    if not url and not (workspace / "intellagent.db").is_file():
        raise IntellagentError("no intellagent.db here: not a workspace", file=workspace)
    where = safe_url(url) if url else str(workspace / "intellagent.db")
    url = url or f"sqlite:///{workspace / 'intellagent.db'}"
    read_only = False
    try:
        opened = Store(url, check=False)
    except ReadOnlyStore:  # one it may not write is checked as it is, not migrated
        opened, read_only = Store(url, read_only=True, check=False), True
    problems = opened.problems(thorough=True)
    for problem in problems:
        click.echo(f"error: {where}: {problem}", err=True)
    if problems:
        sys.exit(2)
    click.echo(f"ok: {where}: {opened.describe()}; integrity ok"
               + ("; read-only here: checked as it is" if read_only else ""))


RETRIED = {"infra-error": "an endpoint fault or a timeout, asked again",
           "invalid-output": "a model answer that did not fit, asked again with another seed"}
"""Item statuses a re-run can fix, and how (a budget stop is fixed by raising the budget)."""


def process_started() -> float:
    """When this process started (the interpreter's start and imports included), as Linux's
    /proc tells it to a clock tick; elsewhere, now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()
    return time.time() - max(0.0, since_boot)


def main() -> None:
    """Console entry point. Unexpected errors are shown in one line unless INTELLAGENT_DEBUG=1."""
    try:
        cli.main(prog_name="intellagent", standalone_mode=True, obj={"started": process_started()})
    except IntellagentError as exc:
        _fail(exc)
    except Exception as exc:  # pragma: no cover - a bug; keep the user's screen readable
        if os.environ.get("INTELLAGENT_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} "
                   "(set INTELLAGENT_DEBUG=1 for the traceback)", err=True)
        sys.exit(EXIT_UNFINISHED)

