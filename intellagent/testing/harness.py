"""Running steps and pipelines from tests, without the command line.

- ``step_context(env, ...)`` makes the context a step gets from the runner;
- ``run_step(plugin, env, **inputs)`` runs one configured step on given inputs;
- ``run_pipeline(pipeline, env, ...)`` resolves and runs a whole pipeline (a registered name, a
  YAML file, or a dict), with optional provider objects standing in for models by name.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from intellagent.context import StepContext, StepLLM
from intellagent.environment import Environment
from intellagent.llm import LLM
from intellagent.store import Store


def step_context(env: Environment, *, llm: LLM | None = None, store: Store | None = None,
                 seed: int = 0, roles: dict[str, str] | None = None, step: str = "test",
                 key: str = "test", agent: Any = None) -> StepContext:
    """A step context on ``env``. ``agent`` is a factory ``f(ground_truth)`` for steps that talk
    to an agent under test."""
    store = store or (llm.store if llm is not None else Store.in_memory())
    llm = llm or LLM(store=store, seed=seed)
    return StepContext(env=env, llm=StepLLM(llm, step, roles or {}), seed=seed, key=key,
                       item=key, run_id=None, step=step, _store=store, _agent=agent,
                       _memo_scope=[step])


async def run_step(plugin: Any, env: Environment, *, llm: LLM | None = None,
                   store: Store | None = None, seed: int = 0, agent: Any = None,
                   key: str = "test", **inputs: Any) -> Any:
    """What ``plugin.run`` returns for ``inputs`` (a value or an ``Output``)."""
    ctx = step_context(env, llm=llm, store=store, seed=seed, roles=dict(plugin.roles),
                       step=plugin.name, key=key, agent=agent)
    result = plugin.run(ctx, **inputs)
    return await result if inspect.isawaitable(result) else result


def run_pipeline(pipeline: str | Path | dict, env: Environment, *, workspace: Path | None = None,
                 store: Store | None = None, registry: Any = None,
                 providers: dict[str, Any] | None = None, until: str | None = None,
                 overrides: list[tuple[str, Any, str]] | None = None, hooks: Any = None,
                 progress_stream: Any = None) -> Any:
    """Run a pipeline to the end (or ``until`` a step); returns the runner's ``RunResult``.
    ``providers`` maps model names to provider objects (a ``ScriptedModel``, a
    ``FunctionModel``) used instead of building them from the settings."""
    from intellagent.plan import load_plan, plan_from_data
    from intellagent.registry import load_registry
    from intellagent.runner import Runner, drive

    registry = registry or load_registry()
    if isinstance(pipeline, dict):
        plan = plan_from_data(pipeline, Path("<test pipeline>"), registry, overrides=overrides,
                              trusted=True, supplied=providers or {})
    else:
        plan = load_plan(pipeline, registry, overrides=overrides, supplied=providers or {})
    if store is None:
        store = Store.for_workspace(workspace) if workspace is not None else Store.in_memory()

    async def go() -> Any:
        llm = LLM(plan.spec.llm, store=store, registry=registry, seed=plan.spec.seed,
                  providers=providers)
        runner = Runner(plan, env, store=store, llm=llm, registry=registry, workspace=workspace,
                        hooks=hooks, until=until, progress_stream=progress_stream)
        return await runner.run()

    return drive(go())
