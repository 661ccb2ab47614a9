"""Registers IntellAgent's own pipeline stages."""

from intellagent import hookimpl


@hookimpl
def register_stages(register):
    from intellagent_plugins.stages.extractor import PolicyGraphExtractor
    from intellagent_plugins.stages.sampler import MaxWalk, UniformWalk, WeightedWalk

    for stage in (PolicyGraphExtractor, WeightedWalk, UniformWalk, MaxWalk):
        register(stage)
