"""Registers the built-in LLM providers: ``openai`` (any OpenAI-compatible endpoint) and
``mock`` (``mock/schema``, ``mock/scripted``, ``mock/function``)."""

from intellagent import hookimpl


@hookimpl
def register_llm_providers(register):
    from intellagent_plugins.providers.mock import mock_provider
    from intellagent_plugins.providers.openai_compatible import OpenAIProvider

    register("openai", OpenAIProvider)
    register("mock", mock_provider)
