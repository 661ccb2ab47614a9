"""ALMITA (Arcadinho et al.) as a pipeline package: intents → procedures → APIs → flowgraphs →
conversation graphs → noise → coverage-sampled paths → conversations → tests, the agent's next
action on each test, and the seven reply/API metrics with the funnel of what each rule removed.
Registered like any third-party pipeline package, with its built-in ``almita`` environment."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent
INTELLAGENT_NAMESPACE = "almita"
BUILDS_ON = ()  # the engine only


@hookimpl
def register_stages(register):
    from intellagent_plugins.almita.critic import AlmitaCritic
    from intellagent_plugins.almita.extractors import (AlmitaApis, AlmitaConversationGraph, AlmitaFlowgraph,
                                                       AlmitaIntents, AlmitaNoise, AlmitaProcedures)
    from intellagent_plugins.almita.generators import AlmitaConversation, AlmitaPaths, AlmitaTests
    from intellagent_plugins.almita.simulator import AlmitaRunner

    for step in (AlmitaIntents, AlmitaProcedures, AlmitaApis, AlmitaFlowgraph, AlmitaConversationGraph,
                 AlmitaNoise, AlmitaPaths, AlmitaConversation, AlmitaTests, AlmitaRunner, AlmitaCritic):
        register(step, aliases=[f"almita-{step.name}"])


@hookimpl
def register_pipelines(register):
    register("almita", HERE / "pipeline.yaml", aliases=["intellagent/almita"])


@hookimpl
def register_metrics(register):
    from intellagent_plugins.almita.metrics import AlmitaFunnel, AlmitaMetrics

    register("metrics", AlmitaMetrics, aliases=["almita-metrics"])
    register("funnel", AlmitaFunnel, aliases=["almita-funnel"])


@hookimpl
def register_views(register):
    from intellagent_plugins.almita import views

    for name, view in (("procedure", views.ProcedureView), ("flowgraph", views.FlowgraphView),
                       ("graph", views.ConversationGraphView),
                       ("conversation", views.ConversationView), ("test", views.TestCaseView),
                       ("prediction", views.PredictionView), ("verdict", views.VerdictView)):
        register(name, view)


@hookimpl
def register_environments(register):
    register("almita", HERE / "environment", aliases=["intellagent/almita"])
