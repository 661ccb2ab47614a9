"""The generic engine: resolves a pipeline spec into stage plugins, checks that they fit, and runs
them over an environment. It knows no stage's logic."""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from intellagent.artefacts import EventSpec, content_hash
from intellagent.context import RunContext
from intellagent.environment import Environment
from intellagent.errors import ConfigError, IntellagentError
from intellagent.llm import LLM
from intellagent.pipeline import PipelineSpec, PluginRef
from intellagent.registry import Registry
from intellagent.report import EventResult, RunReport, build_report
from intellagent.stages import STAGE_KINDS, Stage
from intellagent.store import Store
from intellagent.yamlio import format_loc, line_of, read_yaml, validate_data

def builtin_pipeline(name: str = "intellagent") -> Path:
    import intellagent_plugins

    return Path(intellagent_plugins.__file__).parent / "pipelines" / f"{name}.yaml"


@dataclass
class Pipeline:
    """A spec with its plugins resolved and their options validated."""

    spec: PipelineSpec
    source: Path | None
    stages: dict[str, Stage] = field(default_factory=dict)
    agent_class: Any = None
    agent_config: Any = None
    reporters: list[Any] = field(default_factory=list)


def load_pipeline(path: Path | None, registry: Registry, overrides: dict[str, Any] | None = None) -> Pipeline:
    """Read and check a pipeline file (the built-in one when ``path`` is None): every stage
    resolves to a plugin of the right kind, every option fits its plugin's config, and each
    stage consumes only what earlier stages produce. No model is called."""
    source = path or builtin_pipeline()
    if path is not None and not path.exists() and builtin_pipeline(str(path)).is_file():
        source = builtin_pipeline(str(path))  # a built-in pipeline by name: intellagent, tau-bench
    raw = read_yaml(source)
    if raw is None:
        raise ConfigError("file is empty", file=source)
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    spec = validate_data(PipelineSpec, raw, source)
    pipeline = Pipeline(spec=spec, source=source)

    def resolve(kind_slot: str, ref: PluginRef, loc: tuple, registry_kind: str = "stage") -> tuple[Any, Any]:
        line = line_of(raw, loc)
        try:
            component = registry.resolve(registry_kind, ref.use)
        except IntellagentError as exc:
            raise ConfigError(f"{format_loc(loc)}: {exc.message}", file=source, line=line) from None
        cls = component.value
        if registry_kind == "stage" and getattr(cls, "kind", None) != kind_slot:
            raise ConfigError(f"{format_loc(loc)}: '{ref.use}' is a {cls.kind}, not a {kind_slot}",
                              file=source, line=line)
        config_model = getattr(cls, "Config", None)
        try:
            config = config_model.model_validate(ref.with_) if config_model else None
        except ValidationError as exc:
            err = exc.errors()[0]
            where = loc + ("with",) + tuple(err["loc"])
            msg = f"unknown key '{err['loc'][-1]}'" if err["type"] == "extra_forbidden" else err["msg"]
            raise ConfigError(f"{format_loc(where)}: {msg} (options of {component.name})", file=source,
                              line=line_of(raw, where) or line) from None
        return cls, config

    for slot in STAGE_KINDS:
        if slot == "reporter":
            continue
        ref = getattr(spec.stages, slot)
        if ref is None:
            raise ConfigError(f"stages.{slot} is missing", file=source, line=line_of(raw, ("stages",)))
        cls, config = resolve(slot, ref, ("stages", slot, "use"))
        pipeline.stages[slot] = cls(config)
    available: set[type] = {Environment}
    for slot in ("extractor", "sampler", "generator", "simulator", "critic"):
        stage = pipeline.stages[slot]
        missing = [t.__name__ for t in stage.consumes if t not in available]
        if missing:
            raise ConfigError(f"stages.{slot}: '{stage.name}' needs {', '.join(missing)}, which no "
                              "earlier stage produces", file=source, line=line_of(raw, ("stages", slot)))
        available |= set(stage.produces)
    pipeline.agent_class, pipeline.agent_config = resolve("agent", spec.agent, ("agent", "use"), "agent")
    for i, name in enumerate(spec.report):
        cls, config = resolve("reporter", PluginRef(use=name), ("report", i))
        pipeline.reporters.append(cls(config))
    return pipeline


class Progress:
    """One line per stage: done/total, failures, cost so far (redrawn in place on a terminal)."""

    def __init__(self, llm: LLM, stream: Any = None) -> None:
        self.llm = llm
        self.stream = stream = stream or sys.stderr
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.counts: dict[str, list[int]] = {}
        self._last = 0.0

    def start(self, stage: str, total: int) -> None:
        self.counts[stage] = [0, 0, total]

    def tick(self, stage: str, failed: bool = False) -> None:
        c = self.counts[stage]
        c[0] += 1
        c[1] += failed
        if self.tty and (time.monotonic() - self._last > 0.2 or c[0] == c[2]):
            self._last = time.monotonic()
            self.stream.write("\r" + self._line(stage))
            self.stream.flush()

    def finish(self, stage: str) -> None:
        self.stream.write(("\r" if self.tty else "") + self._line(stage) + "\n")
        self.stream.flush()

    def _line(self, stage: str) -> str:
        done, failed, total = self.counts[stage]
        return (f"{stage:<9} {done:>5}/{total:<5} failed {failed:<4} "
                f"cost ${self.llm.spent_usd:.4f}  tokens {self.llm.spent_tokens}")


async def run_pipeline(pipeline: Pipeline, env: Environment, *, store: Store, registry: Registry,
                       workspace: Path, model: str | None = None, cache: bool | None = None,
                       progress_stream: Any = None, hooks: Any = None,
                       until: str | None = None) -> tuple[RunReport, list[Path]]:
    """Run the pipeline (up to and including stage ``until``: generate, simulate or critique,
    for the stage commands) and write the reports when it ran to the end."""
    spec = pipeline.spec
    run_id = store.start_run(environment=env.name, seed=spec.seed,
                             config=spec.model_dump(mode="json", by_alias=True))
    llm = LLM(spec.llm, store=store, registry=registry, run_id=run_id, seed=spec.seed, cache=cache,
              model=model)
    ctx = RunContext(env=env, llm=llm, store=store, seed=spec.seed, run_id=run_id)
    ctx.agent_key = content_hash(spec.agent.model_dump(by_alias=True),
                                 llm.settings_for("agent").model_dump())
    progress_stream = progress_stream or sys.stderr
    progress = Progress(llm, progress_stream)
    call = hooks.hook if hooks is not None else None
    if call:
        call.before_run(run=ctx)
    try:
        report = await _run(pipeline, ctx, progress, call, until)
    except BaseException as exc:
        store.flush()
        store.set_run_status(run_id, "failed")
        if call:
            call.on_run_error(run=ctx, error=exc)
        raise
    finally:
        await llm.aclose()
    paths: list[Path] = []
    if until is None:
        folder = workspace / "runs" / run_id
        folder.mkdir(parents=True, exist_ok=True)
        paths = [reporter.write(report, folder) for reporter in pipeline.reporters]
    store.set_run_status(run_id, "budget-exhausted" if llm.budget_exhausted else "done")
    if call:
        call.after_run(run=ctx, report=report)
    if llm.budget_exhausted:
        progress_stream.write(llm.budget_message() + "\n")
    return report, paths


async def _run(pipeline: Pipeline, ctx: RunContext, progress: Progress, call: Any,
               until: str | None = None) -> RunReport:
    stages = pipeline.stages

    def notify(hook: str, stage: Stage, **kwargs: Any) -> None:
        if call:
            getattr(call, hook)(run=ctx, stage=stage, **kwargs)

    async def guarded(stage: Stage, work: Any) -> Any:
        """Run one stage's work; a failure is reported to ``on_stage_error`` and re-raised."""
        try:
            return await work
        except Exception as exc:
            notify("on_stage_error", stage, error=exc)
            raise

    notify("before_stage", stages["extractor"])
    progress.start("extract", 1)
    graph = await guarded(stages["extractor"], stages["extractor"].extract(ctx))
    progress.tick("extract")
    progress.finish("extract")
    notify("after_stage", stages["extractor"], outputs=graph)

    notify("before_stage", stages["sampler"])
    stored = await guarded(stages["sampler"], ctx.item(
        "event-specs", (graph.model_dump(mode="json"), stages["sampler"].name,
                        stages["sampler"].config.model_dump()),
        _SpecList, lambda: _specs(stages["sampler"], ctx, graph)))
    specs: list[EventSpec] = stored.specs
    progress.start("sample", len(specs))
    for _ in specs:
        progress.tick("sample")
    progress.finish("sample")
    notify("after_stage", stages["sampler"], outputs=specs)

    agent_class, agent_config = pipeline.agent_class, pipeline.agent_config
    phases = ("generate", "simulate", "critique")
    phases = phases[:phases.index(until) + 1] if until in phases else phases
    slots = dict(zip(("generate", "simulate", "critique"), ("generator", "simulator", "critic")))
    for name in phases:
        progress.start(name, len(specs))
        notify("before_stage", stages[slots[name]])
    critic = stages["critic"]

    # events in progress at once: enough to keep every model slot busy, few enough that their
    # databases and transcripts do not pile up in memory
    in_progress = asyncio.Semaphore(max(4, 2 * ctx.llm.settings.max_concurrency))

    async def one(spec: EventSpec) -> EventResult:
        async with in_progress:
            return await one_event(spec)

    async def one_event(spec: EventSpec) -> EventResult:
        if ctx.llm.budget_exhausted:
            return None  # type: ignore[return-value]
        event = await guarded(stages["generator"], stages["generator"].generate(ctx, graph, spec))
        progress.tick("generate", failed=event.status != "ok")
        if event.status != "ok" or "simulate" not in phases:
            for name in phases[1:]:
                progress.tick(name, failed=True)
            return EventResult(event=event)
        dialog = await guarded(stages["simulator"], stages["simulator"].simulate(
            ctx, graph, event, lambda: agent_class(agent_config, ctx, event),
            stop_check=getattr(critic, "check_stop", None)))
        progress.tick("simulate", failed=dialog.stop_reason in ("infra-error", "agent-error"))
        if "critique" not in phases:
            return EventResult(event=event, dialog=dialog)
        verdict = await guarded(critic, critic.critique(ctx, graph, event, dialog))
        progress.tick("critique", failed=verdict.status not in ("pass", "fail"))
        return EventResult(event=event, dialog=dialog, verdict=verdict)

    results = [r for r in await asyncio.gather(*[one(s) for s in specs]) if r is not None]
    outputs = {"generate": [r.event for r in results], "simulate": [r.dialog for r in results if r.dialog],
               "critique": [r.verdict for r in results if r.verdict]}
    for name in phases:
        progress.finish(name)
        notify("after_stage", stages[slots[name]], outputs=outputs[name])
    ctx.store.flush()
    return build_report(run_id=ctx.run_id, environment=ctx.env.name,
                        agent=pipeline.spec.agent.use,
                        seed=ctx.seed, graph=graph, results=results,
                        cost=ctx.store.cost_summary(ctx.run_id))


class _SpecList(BaseModel):
    specs: list[EventSpec]


async def _specs(sampler: Any, ctx: RunContext, graph: Any) -> _SpecList:
    return _SpecList(specs=sampler.sample(ctx, graph))
