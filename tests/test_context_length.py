"""A prompt longer than the model's context (the provider's 400 saying so) is no fault a re-run
can fix: its items stay infra errors, never the agent's failures, and the run's summary says what
would fix them (a model with a longer context, shorter prompts) instead of "run again"."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from intellagent.cli import cli
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.openai_server import OpenAIServer
from intellagent_plugins.reporters.writers import read_report

CONTEXT = 150  # tokens: the agent's first prompt (its tools and the environment's prompt) is longer


def test_a_prompt_over_the_models_context_is_not_advised_a_rerun(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer(context_length=CONTEXT) as server:
        result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path), "--set",
                                     f"llm.roles.agent={{model: gpt-4o-mini, base_url: '{server.base_url}', "
                                     "api_key_env: TEST_KEY}"])
    assert result.exit_code == 3, result.output  # the run could not finish, as with any infra error
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    dialogs = next(s for s in report["steps"] if s["name"] == "dialogs")
    assert dialogs["statuses"] == {"infra-error": 2}
    assert report["metrics"]["success"]["values"]["n"] == 0  # no agent failure counted
    assert "run the same command again" not in result.stdout and "a re-run can fix" not in result.stdout
    line = next(x for x in result.stdout.splitlines() if "context" in x)
    assert "(dialogs 2;" in line and "prompt longer than its model's context" in line, line
    assert "a model with a longer context" in line and "max_turns" in line, line


def test_a_400_that_is_no_context_overflow_stays_a_rejected_request(runner, tmp_path, monkeypatch):
    """A server's 400 that is no context overflow is a rejected request as before; the overflow is
    known through LiteLLM too."""
    monkeypatch.setenv("TEST_KEY", "k")

    async def ask(server, text, provider=None):
        model = "openai/gpt-4o-mini" if provider else "gpt-4o-mini"
        llm = LLM(LLMSettings(default=ModelSettings(model=model, provider=provider, base_url=server.base_url,
                                                    api_key_env="TEST_KEY"), cache=False, max_retries=0))
        try:
            return await llm.chat([{"role": "user", "content": text}])
        finally:
            await llm.aclose()

    with OpenAIServer(context_length=CONTEXT) as server:
        long = asyncio.run(ask(server, "word " * 200))
        server.schedule("400")
        bad = asyncio.run(ask(server, "hello"))
        through_litellm = asyncio.run(ask(server, "word " * 200, "litellm"))
    assert long.status.value == "infra-error" and long.error.startswith("context-length: 400: "), long.error
    assert through_litellm.error.startswith("context-length: 400: "), through_litellm.error
    assert bad.status.value == "infra-error" and bad.error.startswith("rejected: 400: "), bad.error


@pytest.mark.parametrize("text", [
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    "prompt is too long: 210000 tokens > 200000 maximum",  # Anthropic
    "the request exceeds the available context size, try increasing it",  # llama.cpp server
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",  # Gemini
])
def test_each_providers_words_for_a_context_overflow_are_known(text):
    from intellagent.llm.errors import ContextTooLong, rejected

    assert isinstance(rejected(f"400: {text}", 400), ContextTooLong)
    assert not isinstance(rejected("400: 'temperature' must be at most 2", 400), ContextTooLong)


@pytest.mark.skipif(importlib.util.find_spec("tooltalk") is None, reason="pip install --no-deps nvidia-tooltalk")
def test_a_tooltalk_replay_over_the_agents_context_is_not_advised_a_rerun(runner, tmp_path, monkeypatch):
    """ToolTalk's replay keeps the agent model's error in its note, so an overflow there is told
    as one too (its note said only 'could not answer; run again to retry')."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer(context_length=CONTEXT) as server:
        result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path),
                                     "--set", "steps.conversations.with.limit=2", "--set",
                                     f"llm.roles.agent={{model: gpt-4o-mini, base_url: '{server.base_url}', "
                                     "api_key_env: TEST_KEY}"])
    assert result.exit_code == 3, result.output
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    replays = next(s for s in report["steps"] if s["name"] == "replays")
    assert replays["statuses"] == {"infra-error": 2} and replays["over_context"] == {"infra-error": 2}, replays
    assert "a re-run can fix" not in result.stdout, result.stdout
    assert "(replays 2;" in result.stdout, result.stdout


def test_a_graph_degraded_at_a_prompt_over_the_context_is_not_advised_a_rerun(runner, tmp_path, monkeypatch):
    """The policy graph is made degraded when some pairs of policies cannot be scored; when their
    prompts are over the edges model's context a re-run fails the same way, so the summary says
    what fixes it instead of 'run the same command again to make them whole'."""
    monkeypatch.setenv("TEST_KEY", "k")
    with OpenAIServer(context_length=CONTEXT) as server:
        result = runner.invoke(cli, ["run", "education", "--events", "1", "--workspace", str(tmp_path), "--set",
                                     f"llm.roles.edges={{model: gpt-4o-mini, base_url: '{server.base_url}', "
                                     "api_key_env: TEST_KEY}"])
    report = read_report(next(tmp_path.glob("runs/*/report.json")))
    graph = next(s for s in report["steps"] if s["name"] == "graph")
    assert graph["statuses"] == {"degraded": 1} and graph["over_context"] == {"degraded": 1}, graph
    assert result.exit_code == 3, result.output  # the graph is not whole, as with any degraded item
    assert "make them whole" not in result.stdout and "a re-run can fix" not in result.stdout, result.stdout
    line = next(x for x in result.stdout.splitlines() if "longer than its model's context" in x)
    assert "(graph 1;" in line and "made degraded" in line and "a model with a longer context" in line, line
