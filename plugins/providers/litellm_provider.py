"""Any model LiteLLM serves (Anthropic, Gemini, Bedrock, Vertex AI, Mistral, …, and any
OpenAI-compatible endpoint), through the same LLM layer as every other provider: retries,
budget, accounting and the cache are the layer's. ``provider: litellm`` in a model setting, the
model named as LiteLLM names it (``anthropic/claude-sonnet-4-5``, ``gemini/gemini-2.5-flash``).

Chat and tool calls go through ``litellm.acompletion``; structured output through instructor's
handlers, as the ``openai`` provider asks for it (:class:`~.instructed.Instructed`). LiteLLM's
own retries are off (the layer retries), parameters a provider does not take (a seed, for
Anthropic) are dropped, its errors become the layer's (a 429 with its Retry-After, a 5xx and a
timeout retried, a refused key or unknown model stopping the run), and its cost map is neither
fetched nor used: prices are the layer's. LiteLLM is the ``litellm`` extra, imported when a run
first calls such a model (it takes seconds to import).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from intellagent.errors import ConfigError
from intellagent.llm.errors import (ConnectionLost, MalformedResponse, ProviderError, RateLimited,
                                    RealModelForbidden, RequestTimeout, ServerError, rejected)
from intellagent.llm.types import ChatReply, ChatRequest, ToolCall, Usage
from intellagent.pipeline import ModelSettings
from intellagent.pipeline import is_loopback as _is_local
from intellagent.redaction import Redactor
from intellagent_plugins.providers.instructed import DEFAULT_TIMEOUT, Instructed, short, translate

#: option names that would carry a secret: keys come from environment variables only
SECRET_OPTION = re.compile(r"(?i)(api_?key|secret|password|credential|token$)")
#: environment variables whose values are masked in LiteLLM's error texts (it reads a provider's
#: key from its own variable: ANTHROPIC_API_KEY, AWS_SECRET_ACCESS_KEY, …)
SECRET_VARIABLE = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL)")
LITELLM_PREFIX = re.compile(r"^litellm\.\w+: (\w+: )?")


def load_litellm() -> Any:
    """The ``litellm`` module, offline: its cost map read from the package, never fetched at
    import (``LITELLM_LOCAL_MODEL_COST_MAP``), no banner on stdout."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise ConfigError("provider 'litellm' needs the litellm extra: pip install 'intellagent[litellm]'",
                          item="provider litellm") from None
    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # the layer reports faults itself
    return litellm


class LiteLLMProvider(Instructed):
    """Chat (with tool calling) and structured output through LiteLLM."""

    name = "litellm"
    cacheable = True

    def __init__(self, settings: ModelSettings, *, seed: int = 0) -> None:
        self.model = settings.model
        self.base_url = settings.base_url
        if os.environ.get("INTELLAGENT_OFFLINE") and not _is_local(self.base_url):
            raise RealModelForbidden(
                f"model '{settings.model}' at {self.base_url or 'its provider'} is not local and "
                "INTELLAGENT_OFFLINE is set (tests may only use mock/... models or 127.0.0.1)")
        for option in settings.options:
            if SECRET_OPTION.search(option):
                raise ConfigError(f"option '{option}' would put a secret in YAML; put it in an "
                                  "environment variable (a key: name it with api_key_env)",
                                  item=f"model {settings.model}")
        self.options = dict(settings.options)
        api_key = None
        if settings.api_key_env:
            api_key = os.environ.get(settings.api_key_env)
            if not api_key:
                raise RealModelForbidden(f"no API key for model '{settings.model}': set {settings.api_key_env}")
        elif _is_local(self.base_url):
            api_key = "local"  # a local server needs none; LiteLLM would look for one
        self._api_key = api_key
        self.timeout = settings.timeout or DEFAULT_TIMEOUT
        # auto: a provider's own API takes a forced tool call; another endpoint is probed once
        self.mode: str | None = settings.structured if settings.structured != "auto" else (
            "tools" if self.base_url is None else None)
        self._probe_lock = None
        self._cap_output = True  # Anthropic's API requires an output cap
        self.litellm = load_litellm()
        try:
            self.litellm.get_llm_provider(self.model, api_base=self.base_url)
        except Exception as exc:
            raise ConfigError(f"LiteLLM does not know which provider serves '{self.model}': name it "
                              "with its provider's prefix, e.g. anthropic/claude-sonnet-4-5 or "
                              "openai/MODEL for an OpenAI-compatible base_url",
                              item=f"model {settings.model}") from exc
        self.redact = Redactor.from_env(n for n in os.environ if SECRET_VARIABLE.search(n.upper()))

    async def _complete(self, params: dict[str, Any]) -> Any:
        """One ``litellm.acompletion``: its answer (OpenAI-shaped), or a ProviderError."""
        extra: dict[str, Any] = {"timeout": self.timeout, "num_retries": 0, "max_retries": 0,
                                 "drop_params": True, **self.options}
        if self.base_url:
            extra["api_base"] = self.base_url
        if self._api_key:
            extra["api_key"] = self._api_key
        try:
            return await self.litellm.acompletion(**params, **extra)
        except Exception as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> ProviderError:
        """LiteLLM's exception as the LLM layer's (its classes are the openai SDK's)."""
        import openai

        # "litellm.RateLimitError: RateLimitError: AnthropicException - ..." → "AnthropicException - ..."
        text = self.redact(LITELLM_PREFIX.sub("", short(exc))) or type(exc).__name__
        if isinstance(exc, openai.APITimeoutError):
            return RequestTimeout(text)
        if isinstance(exc, openai.APIResponseValidationError):
            return MalformedResponse(text)
        if isinstance(exc, openai.APIConnectionError):
            return ConnectionLost(text)
        status = getattr(exc, "status_code", None)
        if status == 429:
            headers = getattr(getattr(exc, "response", None), "headers", None) or {}
            try:
                wait = float(headers.get("retry-after")) if headers.get("retry-after") else None
            except (TypeError, ValueError):
                wait = None
            return RateLimited(f"429 rate limited: {text}", wait)
        if isinstance(status, int) and 400 <= status < 500:
            return rejected(f"{status}: {text}", status)
        if isinstance(status, int):
            return ServerError(f"{status} from server: {text}")
        if isinstance(exc, openai.APIError):
            return ServerError(text)
        return translate(exc)

    def _completion(self, request: ChatRequest | None, tally: list[int] | None) -> Any:
        async def create(**params: Any) -> ChatCompletion:
            completion = _as_completion(await self._complete(params))
            if tally is not None and completion.usage is not None:
                tally[0] += completion.usage.prompt_tokens or 0
                tally[1] += completion.usage.completion_tokens or 0
                details = completion.usage.prompt_tokens_details
                tally[2] += getattr(details, "cached_tokens", None) or 0
            return completion
        return create

    async def chat(self, request: ChatRequest) -> ChatReply:
        completion = _as_completion(await self._complete(self._params(request)))
        try:
            choice = completion.choices[0]
            message = choice.message
            usage = completion.usage
            details = getattr(usage, "prompt_tokens_details", None)
            return ChatReply(
                content=message.content,
                tool_calls=[ToolCall(id=c.id or "", name=c.function.name, arguments=c.function.arguments or "")
                            for c in (message.tool_calls or [])],
                finish_reason=choice.finish_reason,
                usage=Usage(prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                            cached_tokens=getattr(details, "cached_tokens", None) or 0))
        except (AttributeError, IndexError, TypeError, ValidationError) as exc:
            raise MalformedResponse(f"the answer is not a chat completion: {short(exc)}") from exc

    async def aclose(self) -> None:
        """LiteLLM keeps its HTTP clients itself."""


def _as_completion(response: Any) -> ChatCompletion:
    """LiteLLM's ModelResponse as the openai SDK's ChatCompletion (what instructor's handlers
    read), leniently when a provider's answer does not fit its declared types."""
    data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
    try:
        return ChatCompletion.model_validate(data)
    except ValidationError:
        return ChatCompletion.model_construct(**data)
