"""Registers the built-in ``new-env`` project template."""

from pathlib import Path

from intellagent import hookimpl


@hookimpl
def register_env_templates(register):
    register("environment", Path(__file__).parent / "env_template")
