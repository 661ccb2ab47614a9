"""Registers IntellAgent's own pipeline stages."""

from intellagent import hookimpl


@hookimpl
def register_stages(register):
    from intellagent_plugins.stages.critic import PolicyCritic
    from intellagent_plugins.stages.extractor import PolicyGraphExtractor
    from intellagent_plugins.stages.generator import SymbolicEvents
    from intellagent_plugins.stages.sampler import MaxWalk, UniformWalk, WeightedWalk
    from intellagent_plugins.stages.simulator import UserAgentSimulator
    from intellagent_plugins.stages.tau import TauPolicy, TauState, TauTaskEvents, TauTasks

    for stage in (PolicyGraphExtractor, WeightedWalk, UniformWalk, MaxWalk, SymbolicEvents,
                  UserAgentSimulator, PolicyCritic, TauPolicy, TauTasks, TauTaskEvents, TauState):
        register(stage)
