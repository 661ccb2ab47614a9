"""Registers the executors that spread a run over several processes: ``processes`` (workers on
this machine) and ``ray`` (workers on a Ray cluster). Both share the run's items through the
store (see :mod:`intellagent.executors`); ``ray`` is imported only when a run uses it."""

from intellagent import hookimpl


@hookimpl
def register_executors(register):
    from intellagent_plugins.executors.processes import ProcessesExecutor
    from intellagent_plugins.executors.ray import RayExecutor

    register(ProcessesExecutor.name, ProcessesExecutor)
    register(RayExecutor.name, RayExecutor)
