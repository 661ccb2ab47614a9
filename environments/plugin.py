"""Registers the built-in environments, exactly as a third-party package would."""

from pathlib import Path

from intellagent import hookimpl

HERE = Path(__file__).parent


@hookimpl
def register_environments(register):
    for name in ("airline", "retail", "education"):
        register(name, HERE / name)
