"""The runner: a run's lifecycle over a plan and an environment. It knows no step's logic.

A run is identified by what defines it (the pipeline's spec, the models, the environment's
content): a later attempt at an unfinished run resumes it. The runner starts the run in the
store, has the scheduler (:mod:`intellagent.scheduling`) walk the steps with the item maker
(:mod:`intellagent.items`: keys, reuse, claims) through the plan's executor, keeps the claims
alive, shows progress (:mod:`intellagent.progress`), tells the observer hooks, and reduces the
finished run into its report (:mod:`intellagent.report`). Items are committed with the model
calls that made them, so a run killed at any moment resumes without redoing a finished item.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import sys
import time
import types
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from intellagent import __version__
from intellagent.agent import AgentSetup, AgentUnavailable
from intellagent.environment import Environment
from intellagent.events import AgentTurnDone, ModelCall, ToolCallDone
from intellagent.errors import NOT_WRITABLE, IntellagentError
from intellagent.executors import SharedRun, WorkerJob, fan_out_limit
from intellagent.hashing import content_hash
from intellagent.items import ItemMaker
from intellagent.llm import LLM
from intellagent.llm.prices import unused_prices
from intellagent.offload import Offload
from intellagent.pipeline import is_loopback
from intellagent.plan import Plan, PlannedStep
from intellagent.progress import DEFAULT_EVERY, Progress
from intellagent.provenance import provenance_of
from intellagent.registry import Registry, null_hooks
from intellagent.replay import Recording
from intellagent.report import RunInfo, RunReport, build_report, write_reports
from intellagent.results import RunData, summarize
from intellagent.scheduling import Held, Scheduler, Scope, first_error
from intellagent.store import HOST, Store

#: LLM settings that change how a run goes, not what it finds: a run resumed with another budget
#: or concurrency is the same run
OPERATIONAL = {"budget_usd", "budget_tokens", "max_concurrency", "requests_per_minute",
               "tokens_per_minute", "max_retries", "backoff_base", "backoff_max", "timeout", "deadline",
               "cache"}

#: Seconds an answered model call may wait for its commit while a run's steps execute (the
#: store's ``answer_window``): the answers of 50 ms share one transaction. A kill loses at most
#: the answers of its last 50 ms; every other end of the steps flushes them.
ANSWER_WINDOW = 0.05

#: The step item the code running now works for (set while the scheduler makes it; inherited by
#: the tasks it starts): a model call's event names its step and item through it
_ITEM: ContextVar[tuple[PlannedStep, str] | None] = ContextVar("intellagent_item", default=None)


@dataclass
class RunHandle:
    """What observer hooks see as ``run``."""

    run_id: str
    plan: Plan
    env: Environment
    seed: int
    workspace: Path | None
    llm: LLM
    otel: str | None = None  # the OTLP endpoint `--otel` named, for an observer exporting traces


@dataclass
class RunResult:
    run_id: str
    report: RunReport | None
    paths: list[Path]
    data: RunData
    unwritten: OSError | None = None  # what kept its reports from being written (the run kept)


class Runner:
    def __init__(self, plan: Plan, env: Environment, *, store: Store, llm: LLM,
                 registry: Registry, workspace: Path | None = None, hooks: Any = None,
                 until: str | None = None, progress_stream: Any = None,
                 new_report: bool = False, join: str | None = None, name: str = "",
                 gates: list[Any] | None = None, progress_every: float = DEFAULT_EVERY,
                 quiet: bool = False, otel: str | None = None,
                 replay: Recording | None = None, started: float | None = None,
                 reports: bool = True, keep_unwritten: bool = False) -> None:
        self.plan = plan
        self.reports = reports  # False: the caller writes them (after what it adds to them)
        self.keep_unwritten = keep_unwritten  # a report folder it may not write: returned, not raised
        #: when the work of this run began (the process's start, for a command's first run):
        #: its start up to its first item is recorded for the next estimate
        self.started = started if started is not None else time.time()
        self.free_items: dict[str, list[float]] = {}  # of the steps calling no model: items, seconds
        self._item_began: dict[tuple[str, str], float] = {}
        self.replay = replay  # the run whose recorded dialogs this one replays
        self.gates = plan.gates if gates is None else gates
        self.join = join  # a worker joining this run (of a sharing executor): no report
        self.name = name
        self.new_report = new_report
        self.report_folder = ""
        self.env = env
        self.store = store
        self.llm = llm
        self.registry = registry
        self.workspace = workspace
        self.hook = (hooks if hooks is not None else null_hooks()).hook
        self.until = until
        if until is not None and until not in plan.steps:
            raise IntellagentError(f"no step named '{until}' (steps: {', '.join(plan.steps)})",
                                   item="--until")
        names = plan.upstream(until) if until else list(plan.steps)
        plan.check_environment(env, names)
        self.steps = [plan.steps[n] for n in names]
        self.seed = plan.spec.seed
        self.progress = Progress({s.name: s.statuses.passed for s in self.steps}, progress_stream,
                                 every=progress_every, quiet=quiet or join is not None)
        self.otel = otel
        self.run_id = ""
        self.owner = ""
        self.handle: RunHandle | None = None
        self.items: ItemMaker | None = None
        self.agent = AgentSetup()  # what the agent under test is, once prepared
        self.lineage = ""
        self.offload = Offload(max(4, 2 * llm.settings.max_concurrency))

    @property
    def talks_to_agent(self) -> bool:
        return self.plan.agent is not None and any(s.uses_agent for s in self.steps)

    async def _prepare_agent(self) -> None:
        """Before the first paid call: the agent under test checked and set up for the run (one
        line and exit 2 when it cannot be used; no model call made)."""
        if not self.talks_to_agent:
            return
        component = self.plan.agent
        try:
            self.agent = await component.value.prepare(self.plan.agent_config, self.env)
        except AgentUnavailable as exc:
            raise IntellagentError(f"the agent under test cannot be used: {exc}",
                                   item=f"agent {component.name}") from None

    def identity(self) -> str:
        """What makes two runs the same run: a later attempt at it resumes it (an agent of
        another version makes another run)."""
        spec = self.plan.spec.model_dump(mode="json", by_alias=True, exclude={"executor", "llm"})
        models = self.llm.settings.model_dump(mode="json", exclude=OPERATIONAL)
        extra = [["mutant", self.plan.mutant.name]] if self.plan.mutant is not None else []
        if self.replay is not None:
            extra.append(self.replay.fingerprint)
        return content_hash(self.plan.name, spec, models, self.until, self.env.name,
                            self.env.fingerprint(), self.agent.identity, *extra)

    def _begin(self, run_id: str, owner: str) -> None:
        self.run_id = run_id
        self.llm.run_id = run_id
        self.owner = owner
        self.handle = RunHandle(run_id, self.plan, self.env, self.seed, self.workspace, self.llm,
                                self.otel)
        self.items = ItemMaker(self.plan, self.env, store=self.store, llm=self.llm, seed=self.seed,
                               run_id=run_id, owner=owner, on_error=self._step_error,
                               agent=self.agent, lineage=self.lineage, offload=self.offload,
                               observe=self._inside_item, recording=self.replay)
        self.llm.watchers.append(self._model_call)

    def _shared_run(self) -> SharedRun:
        """What a sharing executor needs: this run, and (here, not in a worker) how to start
        workers on it."""
        job = None
        if self.join is None:
            modules = [p.__name__ for p in self.registry.pm.get_plugins()
                       if isinstance(p, types.ModuleType) and getattr(p, "__file__", None)
                       and p.__name__ in sys.modules]
            job = WorkerJob(store_url=self.store.url, run_id=self.run_id,
                            environment=dict(self.env._source) or {"path": str(self.env.path)},
                            environment_fingerprint=self.env.fingerprint(),
                            plugin_modules=modules, cache=self.llm.cache_enabled, until=self.until)
        return SharedRun(self.store, self.run_id, self.owner, job)

    async def join_run(self) -> dict[str, Any]:
        """Work on a run another process started (a sharing executor's worker): the same plan
        on the same store, taking items through it; no report."""
        assert self.join is not None
        config = self.store.run_config(self.join)
        await self._prepare_agent()
        self.agent.identity = (config.get("agent") or {}).get("identity")  # the run's, as it began
        if config.get("mutant"):  # a mutant run's workers wrap the agent the same way
            self.plan.mutant = self.registry.resolve("mutant", config["mutant"])
        if config.get("replays"):  # a replay's workers replay the same recording
            self.replay = Recording(self.store, config["replays"], self.plan, config.get("replay_text", "exact"))
        self.lineage = config.get("lineage") or self.join
        self._begin(self.join, f"{HOST}:{os.getpid()}:{self.join}:{self.name}")
        try:
            await self._execute()
        finally:
            self.progress.close()
            self.store.flush()
            await self._close()
        return {"worker": self.name, "pid": os.getpid(), "made": self.items.made if self.items else 0}

    async def _execute(self) -> None:
        """Every item of the plan through its executor (shared with other processes when it
        shares work), keeping this process's claims alive meanwhile."""
        assert self.items is not None
        executor = self.plan.executor
        keeper = asyncio.ensure_future(self.items.keep_claims())
        flusher = asyncio.ensure_future(self._flush_on_time())
        # the environment's seed database, built in a thread while the first model calls are in
        # flight rather than by the first item that needs it (a failure there is raised again,
        # where it belongs, by the first copy)
        seed = asyncio.get_running_loop().run_in_executor(None, self.env.prepare)
        seed.add_done_callback(lambda done: done.cancelled() or done.exception())
        self.progress.start()
        window, self.store.answer_window = self.store.answer_window, ANSWER_WINDOW
        try:
            if executor.shares_work:
                await executor.open(self._shared_run())
                if self.llm.limiter.active:  # one rate limit for every process of the run
                    self.llm.limiter.share(self.store, self.run_id)
                self.llm.share_budget(self.store, self.run_id)  # and one budget
            scheduler = Scheduler(self.plan, self.steps, store=self.store, run_id=self.run_id,
                                  make=self.items.make, observer=self,
                                  limit=fan_out_limit(self.llm.settings.max_concurrency))
            await scheduler.run()
        except BaseExceptionGroup as group:  # noqa: F821 - builtin in 3.11
            raise first_error(group) from None
        finally:
            self.store.answer_window = window  # (both callers flush next: no answer is left waiting)
            keeper.cancel()
            flusher.cancel()
            await executor.close()

    async def _flush_on_time(self) -> None:
        """The store's buffered rows committed at most ``FLUSH_SECONDS`` apart while the run waits
        (its model calls in flight add no row): a worker waiting for an item this process has
        finished sees it then, not when the next row happens to come."""
        while True:
            await asyncio.sleep(self.store.FLUSH_SECONDS)
            self.store.flush_due()

    def _check_prices(self) -> None:
        """A model with no known price, of a role the steps to run call (not a later step's,
        under --until): a warning naming it; with a dollar budget (and no token budget), a
        refusal, since the budget could not hold. A price key that prices no model of the
        pipeline: a warning naming it (a typo leaves the library's price in force)."""
        unused = unused_prices(self.llm.settings, self.plan.roles_used())
        if unused:
            self.progress.stream.write(f"warning: {unused}\n")
        unpriced = self.llm.unpriced(self.plan.roles_used([s.name for s in self.steps]))
        if not unpriced:
            return
        models = "; ".join(f"{m} (role {', '.join(r)})" for m, r in unpriced.items())
        # a name with a dot is quoted: --set splits its path at dots (llm.prices.qwen2 of qwen2.5:7b)
        # a model served on this machine costs nothing unless said (a local proxy to a paid API
        # does): its hint is a price of 0, never assumed
        local = {m for m, roles in unpriced.items() if all(is_loopback(self.llm.settings_for(r).base_url)
                                                           for r in roles)}
        how = "give {} with {} (dollars per million tokens{})".format(
            "it" if len(unpriced) == 1 else "each", " ".join(
                f"--set 'llm.prices.{json.dumps(m) if '.' in m else m}="
                + ("{input: 0, output: 0}'" if m in local else "{input: 2.5, output: 10}'")
                for m in unpriced), "; 0 for a model you serve yourself" if local else "")
        s = self.llm.settings
        if s.budget_usd is not None and s.budget_tokens is None:
            raise IntellagentError(f"a dollar budget needs every model's price, and there is none for "
                                   f"{models}: {how}, or give a token budget instead "
                                   f"(--set llm.budget_tokens=N)", **self.plan.origin(("llm", "budget_usd")))
        self.progress.stream.write(f"warning: no known price for {models}: "
                                   f"{'its' if len(unpriced) == 1 else 'their'} calls count as $0; {how}\n")

    async def run(self) -> RunResult:
        spec = self.plan.spec
        self._check_prices()
        try:
            await self._prepare_agent()
        except BaseException:
            await self._close()
            raise
        identity = self.identity()
        resumed = None if self.new_report else self.store.resumable_run(identity)
        # a resumed run writes its report where the run it resumes wrote (or would have), and a
        # black-box agent's finished dialogs are reused only within it and the runs resuming it
        self.report_folder = resumed[1] if resumed else ""
        resumed_config = self.store.run_config(resumed[0]) if resumed else {}
        run_id = self.store.start_run(environment=self.env.name, seed=self.seed, config={
            "pipeline": self.plan.name, "source": str(self.plan.source), "until": self.until,
            "identity": identity, "resumes": resumed[0] if resumed else None,
            "lineage": resumed_config.get("lineage") or (resumed[0] if resumed else None),
            "agent": {"identity": self.agent.identity, "describe": self.agent.describe},
            "mutant": self.plan.mutant.name if self.plan.mutant is not None else None,
            "replays": self.replay.run_id if self.replay is not None else None,
            "replay_text": self.replay.text if self.replay is not None else None,
            "environment_source": {k: str(Path(v).resolve()) if v else None
                                   for k, v in (self.env._source or {"path": str(self.env.path)}).items()},
            "report_folder": self.report_folder or None,
            "spec": spec.model_dump(mode="json", by_alias=True) | {
                "llm": self.llm.settings.model_dump(mode="json")}})
        self.lineage = resumed_config.get("lineage") or (resumed[0] if resumed else run_id)
        self.report_folder = self.report_folder or run_id
        self._begin(run_id, f"{HOST}:{os.getpid()}:{run_id}")
        self.hook.before_run(run=self.handle)
        try:
            began = time.time()
            await self._execute()
            executed = time.time()
            self.store.flush()
            data = RunData(self.store, self.run_id, self.plan)
            steps = summarize(data)
            if self.plan.executor.shares_work:  # count every worker's items and calls
                costs: dict[str, float] = {}
                for row in self.store.cost_summary(self.run_id, made_here=True):
                    costs[row["stage"]] = costs.get(row["stage"], 0.0) + (row["cost_usd"] or 0.0)
                self.progress.recount(steps, costs)
            self.progress.finish()
            status = "budget-exhausted" if self.llm.budget_stopped() else "done"
            report, paths, info, unwritten = None, [], {}, None
            if self.until is None:
                report = build_report(self.plan, data, self.info(status), self.store, steps, self.gates)
                if self.workspace is not None and self.reports:
                    try:
                        paths = write_reports(self.plan, report, data, self.workspace, self.registry,
                                              folder=self.report_folder)
                    except OSError as exc:  # a folder it may not write: every result is in the store
                        if not self.keep_unwritten or exc.errno not in NOT_WRITABLE:
                            raise
                        unwritten = exc
                info = {"info": report.info.model_dump(mode="json")}
            # what the run took besides its items' model calls, for the next estimate: its start
            # (imports, environment, plugins, the agent's pre-flight), the items of the steps that
            # call no model, and its report (the summaries, the reports written); its steps' whole
            # time beside them
            info["timing"] = {"start": round(began - self.started, 3), "steps": round(executed - began, 3),
                              "report": round(time.time() - executed, 3),
                              "no_model": {step: [n, round(seconds, 3)]
                                           for step, (n, seconds) in self.free_items.items()}}
            self.store.set_run_status(self.run_id, status, **info)
        except BaseException as exc:
            self.progress.close()
            self.store.flush()
            stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))  # Ctrl-C
            self.store.set_run_status(self.run_id, "interrupted" if stopped else "failed")
            self.hook.on_run_error(run=self.handle, error=exc)
            raise
        finally:
            self.progress.close()
            await self._close()
        self.hook.after_run(run=self.handle, report=report)
        return RunResult(self.run_id, report, paths, data, unwritten)

    async def _close(self) -> None:
        self.offload.close()
        try:
            await self.agent.close()
        finally:
            await self.llm.aclose()

    def info(self, status: str) -> RunInfo:
        """What the report says about this run itself: what was tested, and what was reused."""
        plan = self.plan
        reused = {s.name: found for s in self.steps if s.uses_agent
                  if (found := self.store.reused(self.run_id, s.name))}
        return RunInfo(run_id=self.run_id, pipeline=plan.name, description=plan.spec.description,
                       environment=self.env.name, environment_version=self.env.version,
                       agent=plan.agent.name if plan.agent else None,
                       models={r: self.llm.settings_for(r).model for r in sorted(plan.roles)},
                       structured=self.llm.structured_modes(sorted(plan.roles)),
                       notices=self.llm.notices(sorted(plan.roles)),
                       unpriced=sorted(self.llm.unpriced(plan.roles_used([s.name for s in self.steps]))),
                       agent_cost_apart=any(s.uses_agent for s in self.steps) and plan.agent is not None
                       and not getattr(plan.agent.value, "roles", None),
                       seed=self.seed, status=status,
                       provenance=provenance_of(plan, self.env, self.llm, self.agent, __version__,
                                                replays=self.replay.run_id if self.replay else None),
                       reused=reused, budget_left=self.llm.budget_left(),
                       budget_refused=self.llm.budget_refused())

    # -- what the scheduler tells (progress and the observer hooks) ------------------------

    def expect(self, step: PlannedStep, n: int) -> None:
        self.progress.expect(step.name, n)

    def step_started(self, step: PlannedStep) -> None:
        self.progress.step_started(step.name)
        self.hook.before_step(run=self.handle, step=step)

    def item_started(self, step: PlannedStep, scope: Scope) -> None:
        _ITEM.set((step, scope.key))
        if not (step.roles or step.uses_agent):
            self._item_began[step.name, scope.key] = time.perf_counter()
        self.hook.before_item(run=self.handle, step=step, item=scope.key)

    def item_done(self, step: PlannedStep, scope: Scope, held: Held) -> None:
        _ITEM.set(None)
        began = self._item_began.pop((step.name, scope.key), None)
        if began is not None and held.made:
            n, seconds = self.free_items.get(step.name, (0, 0.0))
            self.free_items[step.name] = [n + 1, seconds + time.perf_counter() - began]
        self.progress.tick(step.name, held.status, scope.key)
        self.hook.after_item(run=self.handle, step=step, item=scope.key, status=held.status,
                             made=held.made)

    def _model_call(self, call: ModelCall) -> None:
        step, item = _ITEM.get() or (None, None)
        self.progress.call(call, item)
        self.hook.after_model_call(run=self.handle, step=step, item=item, call=call)

    def _inside_item(self, step: PlannedStep, item: str, event: Any) -> None:
        if isinstance(event, AgentTurnDone):
            self.hook.after_agent_turn(run=self.handle, step=step, item=item, turn=event)
        elif isinstance(event, ToolCallDone):
            self.hook.after_tool_call(run=self.handle, step=step, item=item, call=event)

    def step_done(self, step: PlannedStep) -> None:
        self.progress.step_done(step.name)
        figures = self.progress.steps[step.name]
        self.hook.after_step(run=self.handle, step=step,
                             summary={"items": figures.done, "not_ok": figures.not_ok})

    def _step_error(self, step: PlannedStep, exc: BaseException) -> None:
        self.hook.on_step_error(run=self.handle, step=step, error=exc)


_frozen_by: list[tuple[int, int, int]] = []  # one entry per run going on in this process: the thresholds before it

RUN_THRESHOLDS = (2_500, 4, 4)
"""The collector's thresholds while a run goes on (Python's: 700, 10, 10): young collections a
third as often, full ones somewhat more often (every 40,000 allocations against 70,000). In a 200-event
run over HTTP the collector took 0.08 s of CPU instead of 0.16 s (2 % of the run); peak memory
from 100 to 1,600 events grew 1.03× (1.04× with Python's; 1.08–1.10× and 1.06× while 256 response
classes were kept, see ``intellagent.llm.types.RECENT_MODELS``). Rarer full collections let dead
per-event classes pile up: then, with (7,000, 10, 10), 1.13×; with (7,000, 3, 3), 1.11×."""


@contextlib.contextmanager
def batch_collector() -> Iterator[None]:
    """The objects that exist when the first run of this process starts (imported modules,
    classes, plugins, the environment) are left out of garbage collections until the last run
    ends (``gc.freeze``). A full collection walks every tracked object: in a 200-event run the
    full collections took 0.4 s of CPU, in pauses up to 0.14 s that hold every answer waiting on
    the event loop; frozen, 0.22 s and 0.08 s. The collector runs with :data:`RUN_THRESHOLDS`
    until then, and with what it had before after. (Much rarer young collections let the
    per-event classes, which are cyclic garbage, pile up: 546 MB instead of 325 MB at 10,000
    events, before the cycles of each event were taken out.)"""
    before = gc.get_threshold()
    if not _frozen_by:
        gc.freeze()
        gc.set_threshold(*RUN_THRESHOLDS)
    _frozen_by.append(before)
    try:
        yield
    finally:
        before = _frozen_by.pop()
        if not _frozen_by:
            gc.unfreeze()
            gc.set_threshold(*before)


def drive(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end on a new event loop and return what it returns: the entry
    point of every command that runs steps. The loop is uvloop's (libuv) where it is installed,
    as it is with IntellAgent on Linux and macOS: the same asyncio API with its scheduling,
    sockets and timers in C, about 6 % less CPU per model call over a whole run
    (side by side, ``bench/cpu_ab.py``). Elsewhere, or with ``INTELLAGENT_EVENT_LOOP=asyncio``, asyncio's
    own loop."""
    if os.environ.get("INTELLAGENT_EVENT_LOOP", "").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coroutine)
    return asyncio.run(coroutine)


async def run_plan(plan: Plan, env: Environment, *, store: Store, registry: Registry,
                   workspace: Path | None = None, model: str | None = None,
                   cache: bool | None = None, hooks: Any = None, until: str | None = None,
                   progress_stream: Any = None, new_report: bool = False,
                   gates: list[Any] | None = None, progress_every: float = DEFAULT_EVERY,
                   quiet: bool = False, otel: str | None = None,
                   replay: Recording | None = None, started: float | None = None,
                   reports: bool = True, keep_unwritten: bool = False) -> RunResult:
    """Run ``plan`` on ``env``; writes the reports into ``workspace/runs/RUN_ID`` unless
    ``until`` names a step to stop after, or ``reports`` is False (the caller writes them).
    ``keep_unwritten``: a report folder it may not write ends the run as done, the error in
    its result (``unwritten``), instead of failing it. ``started``: when the command began (its
    process's start), the run's start being measured from it; default: now."""
    settings = plan.spec.llm.with_model(model) if model else plan.spec.llm
    llm = LLM(settings, store=store, registry=registry, seed=plan.spec.seed, cache=cache)
    runner = Runner(plan, env, store=store, llm=llm, registry=registry, workspace=workspace,
                    hooks=hooks, until=until, progress_stream=progress_stream,
                    new_report=new_report, gates=gates, progress_every=progress_every,
                    quiet=quiet, otel=otel, replay=replay, started=started,
                    reports=reports, keep_unwritten=keep_unwritten)
    with batch_collector():
        return await runner.run()


async def join_run(plan: Plan, env: Environment, *, store: Store, registry: Registry, run_id: str,
                   cache: bool | None = None, until: str | None = None, name: str = "worker") -> dict:
    """Join run ``run_id`` as a worker of its sharing executor (see
    :func:`intellagent.worker.run_worker`)."""
    llm = LLM(plan.spec.llm, store=store, registry=registry, seed=plan.spec.seed, cache=cache)
    runner = Runner(plan, env, store=store, llm=llm, registry=registry, until=until,
                    join=run_id, name=name)
    with batch_collector():
        return await runner.join_run()
