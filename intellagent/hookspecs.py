"""Every hook IntellAgent calls, grouped by phase.

Registration hooks take a ``register`` callback so the core can check names, refuse duplicates and
remember which distribution supplied what. Observer hooks (``before_*``, ``after_*``,
``on_*_error``) see the run as it happens and return nothing.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

hookspec = pluggy.HookspecMarker("intellagent")
hookimpl = pluggy.HookimplMarker("intellagent")

Register = Callable[..., None]

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
    """Register pipeline stage plugins: extractors, samplers, generators, simulators, critics
    and reporters.

    ``register`` is the callback: call ``register(stage_class)`` with a subclass of
    :class:`intellagent.stages.Stage`; its ``kind`` and ``name`` class attributes say where it
    plugs in and what a pipeline calls it. Every implementation is called; returns nothing.
    """


@hookspec
def register_agents(register: Register) -> None:
    """Register kinds of agent under test (``openai-tools``, ``http``, ``python``, …).

    ``register`` is the callback: call ``register(name, factory)``; ``factory(config)`` builds
    the agent. Every implementation is called; returns nothing.
    """


@hookspec
def register_llm_providers(register: Register) -> None:
    """Register model providers, addressed by a model-name prefix (``mock/``, ``openai/``, …).

    ``register`` is the callback: call ``register(name, factory)``; ``factory(settings)``
    returns a provider. Every implementation is called; returns nothing.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors, which run a stage's independent work items (local async pool, …).

    ``register`` is the callback: call ``register(name, factory)``. Every implementation is
    called; returns nothing.
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
def before_run(run: Any) -> None:
    """Called once before a run's first stage starts.

    ``run`` describes the run: pipeline spec, environment, seed and workspace. Every
    implementation is called; return values are ignored.
    """


@hookspec
def after_run(run: Any, report: Any) -> None:
    """Called once after the last stage finished.

    ``run`` is the run as given to ``before_run``; ``report`` is its final ``RunReport``. Every
    implementation is called; return values are ignored.
    """


@hookspec
def on_run_error(run: Any, error: BaseException) -> None:
    """Called when a run stops on an error; what was already computed stays in the store.

    ``run`` is the run as given to ``before_run``; ``error`` is the exception that stopped it.
    Every implementation is called; return values are ignored.
    """


# ---------------------------------------------------------------------------
# Observers: each stage
# ---------------------------------------------------------------------------


@hookspec
def before_stage(run: Any, stage: Any) -> None:
    """Called before a stage starts its work items.

    ``run`` is the current run; ``stage`` is the configured stage plugin about to start. Every
    implementation is called; return values are ignored.
    """


@hookspec
def after_stage(run: Any, stage: Any, outputs: Any) -> None:
    """Called after a stage finished.

    ``run`` is the current run; ``stage`` the stage plugin that finished; ``outputs`` the
    artefacts it produced. Every implementation is called; return values are ignored.
    """


@hookspec
def on_stage_error(run: Any, stage: Any, error: BaseException) -> None:
    """Called when a stage fails as a whole (not for one item's infrastructure error, which is
    recorded on the item).

    ``run`` is the current run; ``stage`` the failing stage plugin; ``error`` the exception.
    Every implementation is called; return values are ignored.
    """
