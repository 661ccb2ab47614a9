"""Registers the built-in LLM providers: ``openai`` (any OpenAI-compatible endpoint), ``litellm``
(any model LiteLLM serves; the ``litellm`` extra) and ``mock`` (``mock/schema``,
``mock/scripted``, ``mock/function``)."""

from intellagent import hookimpl


def openai_provider(settings, *, seed=0):
    """The ``openai`` provider, imported when a run first uses it: commands that call no model
    (``envs``, ``plugins``, ``validate``) do not load the openai and instructor packages."""
    from intellagent_plugins.providers.openai_compatible import OpenAIProvider

    return OpenAIProvider(settings, seed=seed)


def make_litellm_provider(settings, *, seed=0):
    """The ``litellm`` provider, imported (with LiteLLM, seconds of it) when a run first uses it."""
    from intellagent_plugins.providers.litellm_provider import LiteLLMProvider

    return LiteLLMProvider(settings, seed=seed)


@hookimpl
def register_llm_providers(register):
    from intellagent_plugins.providers.mock import mock_provider

    register("openai", openai_provider)
    register("litellm", make_litellm_provider)
    register("mock", mock_provider)
