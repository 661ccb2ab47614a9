"""Every hook IntellAgent calls, grouped by phase.

Registration hooks take a ``register`` callback so the core can check names, refuse duplicates and
remember which distribution supplied what. Observer hooks (``before_*``, ``after_*``,
``on_*_error``) see the run as it happens and return nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, TypedDict

import pluggy

hookspec = pluggy.HookspecMarker("intellagent")
hookimpl = pluggy.HookimplMarker("intellagent")

Register = Callable[..., None]


class ObservedRun(Protocol):
    """What observers see of a run (:class:`intellagent.runner.RunHandle`)."""

    run_id: str
    plan: Any  #: the resolved pipeline (:class:`intellagent.plan.Plan`)
    env: Any  #: the environment (:class:`intellagent.environment.Environment`)
    seed: int
    workspace: Path | None
    llm: Any  #: the run's models (:class:`intellagent.llm.LLM`): settings, spend so far


class ObservedStep(Protocol):
    """What observers see of a step (:class:`intellagent.plan.PlannedStep`)."""

    name: str  #: its name in the pipeline
    use: str  #: the plugin it runs (``intellagent/policy-critic``)
    kind: str  #: extractor, sampler, generator, simulator or critic
    plugin: Any  #: the configured step


class ObservedReport(Protocol):
    """What ``after_run`` sees of the run's report (:class:`intellagent.report.RunReport`)."""

    info: Any  #: what was run: pipeline, environment, agent, models, seed, status
    steps: list[Any]  #: each step's funnel
    outcomes: dict[str, int]  #: how the items of the first fan-out ended
    metrics: dict[str, Any]  #: every metric's result
    cost: list[dict[str, Any]]  #: calls, tokens and dollars by step and model


class StepCounts(TypedDict):
    """What ``after_step`` tells about a finished step."""

    items: int  #: items of the step in this run
    not_ok: int  #: of which ended with a status the step does not declare as passed

# ---------------------------------------------------------------------------
# Registration: components a distribution contributes
# ---------------------------------------------------------------------------


@hookspec
def register_environments(register: Register) -> None:
    """Register environments (folders of YAML and Python).

    ``register`` is the callback: call ``register(name, path)`` once per environment: ``name``
    is short (``"retail"``) and is namespaced by the registering package (``acme_envs/retail``);
    ``path`` is the environment folder holding ``environment.yaml``. Every implementation is
    called; returns nothing.
    """


@hookspec
def register_stages(register: Register) -> None:
    """Register step plugins of every stage kind (extractors, samplers, generators, simulators,
    critics).

    ``register`` is the callback: call ``register(cls)`` with a subclass of
    :class:`intellagent.steps.Step`; its ``kind`` and ``name`` class attributes say which stage
    kind it is and what a pipeline's ``use:`` calls it. Every implementation is called; returns
    nothing. (A reporter class registered here still works, with a deprecation warning: use
    ``register_reporters``.)
    """


@hookspec
def register_reporters(register: Register) -> None:
    """Register reporters, which write a run's report in a format (``html``, ``json``, ``csv``).

    ``register`` is the callback: call ``register(cls)`` with a subclass of
    :class:`intellagent.report.Reporter`; its ``name`` is what a pipeline's ``report:`` list and
    ``intellagent report --format`` call it. Every implementation is called; returns nothing.
    """


@hookspec
def register_pipelines(register: Register) -> None:
    """Register pipeline specs, so ``--pipeline NAME`` finds them like environments.

    ``register`` is the callback: call ``register(name, path)`` with the pipeline YAML file;
    ``name`` is namespaced by the registering package (``acme/my-pipeline``). Every
    implementation is called; returns nothing.
    """


@hookspec
def register_metrics(register: Register) -> None:
    """Register metric plugins, which reduce the scores of a run's items into tables and
    figures (:class:`intellagent.metrics.Metric`).

    ``register`` is the callback: call ``register(name, metric_class)``; a pipeline's
    ``metrics:`` section uses the name with its options. Every implementation is called;
    returns nothing.
    """


@hookspec
def register_views(register: Register) -> None:
    """Register item views: how reporters show an artefact type (a transcript, a replay's
    per-turn matches) instead of its raw JSON.

    ``register`` is the callback: call ``register(name, view_class)``; the class has
    ``artefact`` (the type it shows) and ``html(value, item)`` returning an HTML fragment.
    Every implementation is called; returns nothing.
    """


@hookspec
def register_agents(register: Register) -> None:
    """Register kinds of agent under test (``openai-tools``, ``http``, ``python``, …).

    ``register`` is the callback: call ``register(name, cls)`` with a subclass of
    :class:`intellagent.agent.Agent`; a pipeline's ``agent: {use: NAME, with: {...}}`` picks it,
    its ``Config`` checks the options, and the runner builds one per conversation as
    ``cls(config, ctx, ground_truth)``. Every implementation is called; returns nothing.
    """


@hookspec
def register_mutants(register: Register) -> None:
    """Register mutants: faults the harness applies around any agent under test, so that
    ``intellagent mutate`` shows which broken agents a test suite catches.

    ``register`` is the callback: call ``register(cls)`` (or ``register(name, cls)``) with a
    subclass of :class:`intellagent.mutants.Mutant`; its ``name`` is what ``--mutants`` calls it.
    One instance wraps each conversation's agent; it may change the agent's turns (its replies)
    and the tool calls the harness runs for it. Every implementation is called; returns nothing.
    """


@hookspec
def register_llm_providers(register: Register) -> None:
    """Register model providers, addressed by a model-name prefix (``mock/``, ``openai/``, …).

    ``register`` is the callback: call ``register(name, factory)``; ``factory(settings, *,
    seed)`` returns a provider for one model's settings (``ModelSettings``). A model setting
    picks it with ``provider: NAME`` (``mock`` for ``mock/...`` models, else ``openai`` by
    default). Every implementation is called; returns nothing.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors, which spread a run's per-item work (``local``: asyncio in this
    process; see :class:`intellagent.executors.Executor`).

    ``register`` is the callback: call ``register(name, executor_class)``; a pipeline picks one
    with ``executor: {use: NAME, with: {...}}``. Every implementation is called; returns nothing.
    """


@hookspec
def register_env_templates(register: Register) -> None:
    """Register project templates for ``intellagent new-env``.

    ``register`` is the callback: call ``register(name, path)`` with a folder of Jinja templates
    (``*.jinja`` files are rendered, others copied). Every implementation is called; returns
    nothing.
    """


@hookspec
def register_commands(register: Register) -> None:
    """Add subcommands to the ``intellagent`` CLI.

    ``register`` is the callback: call ``register(command)`` with a :class:`click.Command`; its
    name must not clash with a built-in command or another plugin's. Every implementation is
    called; returns nothing.
    """


# ---------------------------------------------------------------------------
# Observers: a run's lifecycle
# ---------------------------------------------------------------------------


@hookspec
def before_run(run: ObservedRun) -> None:
    """Called once before a run's first step starts.

    ``run`` describes the run (:class:`intellagent.runner.RunHandle`: run id, plan,
    environment, seed, workspace, the models). Every implementation is called; return values are ignored.
    """


@hookspec
def after_run(run: ObservedRun, report: ObservedReport | None) -> None:
    """Called once after the last step finished and the reports were written.

    ``run`` is the run as given to ``before_run``; ``report`` is its ``RunReport`` (None when
    the run stopped early with ``--until``). Every implementation is called; return values are
    ignored.
    """


@hookspec
def on_run_error(run: ObservedRun, error: BaseException) -> None:
    """Called when a run stops on an error; what was already computed stays in the store.

    ``run`` is the run as given to ``before_run``; ``error`` is the exception that stopped it.
    Every implementation is called; return values are ignored.
    """


# ---------------------------------------------------------------------------
# Observers: each step
# ---------------------------------------------------------------------------


@hookspec
def before_step(run: ObservedRun, step: ObservedStep) -> None:
    """Called when a step starts its first item.

    ``run`` is the current run; ``step`` the planned step (``name``, ``use``, ``kind``,
    ``plugin``). Every implementation is called; return values are ignored.
    """


@hookspec
def after_step(run: ObservedRun, step: ObservedStep, summary: StepCounts) -> None:
    """Called when a step has finished all its items.

    ``run`` is the current run; ``step`` the planned step; ``summary`` a :class:`StepCounts`
    dict with ``items`` (how many) and ``not_ok`` (how many did not pass). Every
    implementation is called; return values are ignored.
    """


@hookspec
def on_step_error(run: ObservedRun, step: ObservedStep, error: BaseException) -> None:
    """Called when a step raises (a bug or bad input), not for one item's infrastructure error,
    which is recorded on the item.

    ``run`` is the current run; ``step`` the planned step; ``error`` the exception. Every
    implementation is called; return values are ignored.
    """


# ---------------------------------------------------------------------------
# Observers: inside each step item (for traces and live views)
# ---------------------------------------------------------------------------


@hookspec
def before_item(run: ObservedRun, step: ObservedStep, item: str) -> None:
    """Called when one item of a step starts (its inputs are ready).

    ``run`` is the current run; ``step`` the planned step; ``item`` the item's key in the run
    (``E0004``, ``""`` for a step that runs once). Every implementation is called; return values
    are ignored.
    """


@hookspec
def after_item(run: ObservedRun, step: ObservedStep, item: str, status: str, made: bool) -> None:
    """Called when one item of a step is finished.

    ``run`` is the current run; ``step`` the planned step; ``item`` the item's key; ``status``
    is how it ended (``ok``, ``pass``, ``infra-error`` …); ``made`` is False when it
    was reused from the store (nothing was computed). Every implementation is called; return
    values are ignored.
    """


@hookspec
def after_model_call(run: ObservedRun, step: ObservedStep | None, item: str | None, call: Any) -> None:
    """Called when a model call ended (answered, failed, or found in the cache).

    ``run`` is the current run; ``step`` and ``item`` are the step item the call was made for,
    as ``before_item`` named it (None for a call made outside any item). ``call`` is an
    :class:`intellagent.events.ModelCall`: stage (the step), role, model, item (its content
    key), cached, attempts, outcome, tokens, cost, when it started and how long it took. Called
    from the event loop: keep it quick. Every implementation is called; return values are
    ignored.
    """


@hookspec
def after_agent_turn(run: ObservedRun, step: ObservedStep, item: str, turn: Any) -> None:
    """Called when the agent under test answered one turn (or failed to).

    ``run`` is the current run; ``step`` the step talking to the agent; ``item`` the item's key;
    ``turn`` is an :class:`intellagent.events.AgentTurnDone`: when it started, how long it took,
    how many tool calls it asked for, its error. Every implementation is called; return values
    are ignored.
    """


@hookspec
def after_tool_call(run: ObservedRun, step: ObservedStep, item: str, call: Any) -> None:
    """Called when a tool of the environment ran on a conversation's database.

    ``run`` is the current run; ``step`` the step of the conversation; ``item`` the item's key;
    ``call`` is an :class:`intellagent.events.ToolCallDone`: the tool's name, when it started,
    how long it took, whether it failed. Every implementation is called; return values are
    ignored.
    """
