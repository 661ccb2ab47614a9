"""APIGen-MT as a pipeline package: verified task blueprints (API dependency graph, context
samplers, format/execution/policy validation, review committee, refinement, recombination) and
simulated trajectories (best-of-N user, state critic, pass^k), with exports of the tasks for the
τ-bench pipeline and of the successful trajectories as training data."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent
INTELLAGENT_NAMESPACE = "apigen-mt"
BUILDS_ON = ("tau_bench",)  # its public artefacts (tasks, task events); plus the shared kits


@hookimpl
def register_stages(register):
    from intellagent_plugins.apigen_mt.critic import TrajectoryState
    from intellagent_plugins.apigen_mt.generator import GenerateBlueprint
    from intellagent_plugins.apigen_mt.graph import ApiGraphExtractor
    from intellagent_plugins.apigen_mt.recombine import RecombinationPairs, Recombine
    from intellagent_plugins.apigen_mt.samplers import BlueprintContexts
    from intellagent_plugins.apigen_mt.simulator import BestOfNUser
    from intellagent_plugins.apigen_mt.tasks import ApigenTasks, BlueprintTaskEvents

    for step in (ApiGraphExtractor, BlueprintContexts, GenerateBlueprint, RecombinationPairs, Recombine,
                 BestOfNUser, TrajectoryState, BlueprintTaskEvents):
        register(step)
    register(ApigenTasks, aliases=["apigen-tasks"])


@hookimpl
def register_reporters(register):
    from intellagent_plugins.apigen_mt.export import ApigenExport

    register(ApigenExport, aliases=["apigen-export"])


@hookimpl
def register_pipelines(register):
    register("apigen-mt", HERE / "pipeline.yaml")


@hookimpl
def register_metrics(register):
    from intellagent_plugins.apigen_mt.metrics import METRICS

    for metric in METRICS:
        register(metric.name, metric, aliases=[f"apigen-{metric.name}"])


@hookimpl
def register_views(register):
    from intellagent_plugins.apigen_mt.views import BlueprintView, PairView

    register("blueprint", BlueprintView)
    register("pair", PairView)
