"""pytest fixtures for environment and plugin authors (installed as a ``pytest11`` plugin).

- ``intellagent_registry``: the registry of installed plugins.
- ``intellagent_env``: ``intellagent_env(name_or_path)`` loads an environment strictly.
- ``intellagent_workspace``: a temporary workspace folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture
def intellagent_registry():
    from intellagent.registry import load_registry

    return load_registry()


@pytest.fixture
def intellagent_env(intellagent_registry) -> Callable:
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path

    def load(name_or_path: str | Path, **kwargs):
        return load_environment(environment_path(intellagent_registry, str(name_or_path)), **kwargs)

    return load


@pytest.fixture
def intellagent_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace
