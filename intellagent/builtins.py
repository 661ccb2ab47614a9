"""The engine's own defaults, registered like any plugin: the generic metrics and the local
executor."""

from intellagent.hookspecs import hookimpl


@hookimpl
def register_metrics(register):
    from intellagent.metrics import GENERIC_METRICS

    for metric in GENERIC_METRICS:
        register(metric.name, metric)


@hookimpl
def register_executors(register):
    from intellagent.executors import LocalExecutor

    register(LocalExecutor.name, LocalExecutor)
