"""The IntellAgent pipeline (the paper's method): policy graph → complexity-spread policy sets →
events with their own databases → simulated users against the agent → policy-by-policy critique.
Registered like any third-party pipeline package."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent
BUILDS_ON = ()  # the engine and the shared kits only


@hookimpl
def register_stages(register):
    from intellagent_plugins.intellagent.critic import PolicyCritic
    from intellagent_plugins.intellagent.extractor import PolicyGraphExtractor
    from intellagent_plugins.intellagent.generator import SymbolicEvents
    from intellagent_plugins.intellagent.sampler import MaxWalk, UniformWalk, WeightedWalk
    from intellagent_plugins.intellagent.simulator import PolicyUser

    for step in (PolicyGraphExtractor, WeightedWalk, UniformWalk, MaxWalk, SymbolicEvents,
                 PolicyUser, PolicyCritic):
        register(step)


@hookimpl
def register_pipelines(register):
    register("intellagent", HERE / "pipeline.yaml")


@hookimpl
def register_metrics(register):
    from intellagent_plugins.intellagent.metrics import CoverageMetric, PoliciesMetric

    register("policies", PoliciesMetric)
    register("coverage", CoverageMetric)


@hookimpl
def register_views(register):
    from intellagent_plugins.intellagent.views import EventView, VerdictView

    register("event", EventView)
    register("verdict", VerdictView)


@hookimpl
def register_commands(register):
    from intellagent_plugins.intellagent.commands import graph

    register(graph)
