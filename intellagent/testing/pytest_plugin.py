"""pytest fixtures for environment and plugin authors (installed as a ``pytest11`` plugin).

- ``intellagent_registry``: the registry of installed plugins.
- ``intellagent_env``: ``intellagent_env(name_or_path)`` loads an environment strictly.
- ``intellagent_workspace``: a temporary workspace folder.
- ``mock_llm``: an :class:`~intellagent.llm.LLM` on ``mock/schema`` with an in-memory store.
- ``scripted_llm``: ``scripted_llm(*replies)`` gives (llm, model) on ``mock/scripted``.
- ``openai_server``: a local OpenAI-compatible server on 127.0.0.1.
- ``postgres_server`` (one per session) and ``postgres_url`` (a fresh database on it, as a
  store URL): a throwaway PostgreSQL server on 127.0.0.1; skipped, with the reason, where no
  server can be started.

``intellagent.testing.harness`` runs one step (``run_step``) or a whole pipeline
(``run_pipeline``) from a test.

While tests run, ``INTELLAGENT_OFFLINE`` is set: a request to any model that is not a mock or
on 127.0.0.1 raises instead of leaving the machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ["INTELLAGENT_OFFLINE"] = "1"


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


@pytest.fixture
def mock_llm():
    from intellagent.llm import LLM

    return LLM(seed=0)


@pytest.fixture
def scripted_llm(intellagent_registry):
    from intellagent.llm import LLM
    from intellagent.pipeline import LLMSettings, ModelSettings

    def make(*replies, **settings):
        model_settings = ModelSettings(model="mock/scripted", options={"replies": list(replies)})
        factory = intellagent_registry.resolve("llm-provider", "mock").value
        model = factory(model_settings)
        llm = LLM(LLMSettings(default=model_settings, **settings),
                  providers={"mock/scripted": model})
        return llm, model

    return make


@pytest.fixture
def openai_server():
    from intellagent.testing.openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server():
    from intellagent.testing.postgres import PostgresServer, unavailable

    reason = unavailable()
    if reason:
        pytest.skip(f"no PostgreSQL: {reason}")
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server) -> str:
    import uuid

    return postgres_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
