"""The built-in mutants: faults the harness applies around any agent under test, so that
``intellagent mutate`` shows which broken agents a test suite catches (drop-writes,
wrong-record, skip-lookup, leak, refuse-all)."""

from intellagent import hookimpl


@hookimpl
def register_mutants(register):
    from intellagent_plugins.mutants.faults import BUILT_IN

    for mutant in BUILT_IN:
        register(mutant)
