"""ToolTalk as a pipeline package: its world as the ``tooltalk`` environment (28 tools over
ToolTalk's databases, read from the installed ``nvidia-tooltalk`` package), the turn-by-turn
replay of its conversations against the agent under test, its tool-call equivalence and metrics,
its scenario generator, and reference agents (the oracle and its perturbations)."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent
BUILDS_ON = ()  # the engine and the shared kits only
INTELLAGENT_NAMESPACE = "tooltalk"


@hookimpl
def register_environments(register):
    register("tooltalk", HERE / "environment")


@hookimpl
def register_stages(register):
    from intellagent_plugins.tooltalk.generation import PluginSubsets, WriteConversation, WriteScenarios
    from intellagent_plugins.tooltalk.steps import Conversations, MatchCalls, ReplayConversation

    for step in (Conversations, ReplayConversation, MatchCalls, PluginSubsets, WriteScenarios,
                 WriteConversation):
        register(step)


@hookimpl
def register_pipelines(register):
    register("tooltalk", HERE / "pipeline.yaml")
    register("tooltalk-generate", HERE / "generate.yaml")


@hookimpl
def register_agents(register):
    from intellagent_plugins.tooltalk.agents import REFERENCE_AGENTS

    for behaviour, agent in REFERENCE_AGENTS.items():
        register(behaviour, agent)


@hookimpl
def register_views(register):
    from intellagent_plugins.tooltalk.views import AssessmentView, ConversationView, ReplayView

    register("conversation", ConversationView)
    register("replay", ReplayView)
    register("assessment", AssessmentView)


@hookimpl
def register_commands(register):
    from intellagent_plugins.tooltalk.commands import tooltalk_group

    register(tooltalk_group)
