"""τ-bench's tasks as a pipeline package: the task sampler, task events, the state critic, the
oracle reference agent, and ``intellagent import tau-bench``."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent
INTELLAGENT_NAMESPACE = "tau-bench"
BUILDS_ON = ()  # plus the shared kits (dialogue)


@hookimpl
def register_stages(register):
    from intellagent_plugins.tau_bench.steps import TauState, TauTaskEvents, TauTasks

    register(TauTasks, aliases=["tau-tasks"])
    register(TauTaskEvents, aliases=["tau-task-events"])
    register(TauState, aliases=["tau-state"])


@hookimpl
def register_pipelines(register):
    register("tau-bench", HERE / "pipeline.yaml")


@hookimpl
def register_agents(register):
    from intellagent_plugins.tau_bench.oracle import TauOracleAgent

    register("oracle", TauOracleAgent, aliases=["tau-oracle"])


@hookimpl
def register_commands(register):
    from intellagent_plugins.tau_bench.importer import import_group

    register(import_group)
