"""The pipeline spec: which plugin runs each stage, with which options and models."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from intellagent.model import StrictModel

from intellagent.stages import STAGE_KINDS  # noqa: E402,F401  (re-exported)


class PluginRef(StrictModel):
    """A plugin by name (``weighted-walk`` or ``acme/weighted-walk``) and its options."""

    use: str
    with_: dict[str, Any] = Field(default_factory=dict, alias="with",
                                  description="Options, checked by the plugin's own config model.")


class ModelSettings(StrictModel):
    """One model endpoint. Keys come from environment variables only."""

    model: str = Field(description="e.g. 'gpt-4o-mini' or 'mock/schema'.")
    provider: str | None = Field(default=None, description="LLM provider plugin; default 'mock' "
                                                           "for mock/... models, else 'openai'.")
    options: dict[str, Any] = Field(default_factory=dict, description="Provider-specific options "
                                    "(e.g. replies for mock/scripted, function for mock/function).")
    base_url: str | None = Field(default=None, description="Any OpenAI-compatible endpoint.")
    api_key_env: str | None = Field(default=None, description="Name of the environment variable "
                                                              "holding the API key.")
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = Field(default=None, description="Seconds per request.")
    api_key: str | None = Field(default=None, description="Refused: name an environment variable "
                                                          "with api_key_env instead.")

    @field_validator("api_key")
    @classmethod
    def _no_literal_keys(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError("API keys are not accepted in YAML; put the key in an environment "
                             "variable and name it with api_key_env")
        return None


class Price(StrictModel):
    input: float = Field(ge=0, description="Dollars per million prompt tokens.")
    output: float = Field(ge=0, description="Dollars per million completion tokens.")


class LLMSettings(StrictModel):
    """A default model, optional overrides per role, and the limits shared by all stages."""

    default: ModelSettings = Field(default_factory=lambda: ModelSettings(model="mock/schema"))
    extractor: ModelSettings | None = None
    edges: ModelSettings | None = None
    generator: ModelSettings | None = None
    user: ModelSettings | None = None
    agent: ModelSettings | None = None
    critic: ModelSettings | None = None
    max_concurrency: int = Field(default=16, ge=1, description="Requests in flight at once.")
    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=5, ge=0, description="Retries of a transient fault.")
    validation_retries: int = Field(default=2, ge=0, description="Re-asks when structured output "
                                                                 "does not fit, with the error.")
    backoff_base: float = Field(default=0.5, gt=0, description="Seconds; doubles per retry.")
    backoff_max: float = Field(default=30.0, gt=0)
    timeout: float = Field(default=120.0, gt=0, description="Seconds per request.")
    budget_usd: float | None = Field(default=None, ge=0, description="Stop launching calls when "
                                                                     "this much is spent.")
    budget_tokens: int | None = Field(default=None, ge=0)
    cache: bool = True
    prices: dict[str, Price] = Field(default_factory=dict, description="Overrides of the price "
                                                                       "table, by model name.")

    ROLES: ClassVar[tuple[str, ...]] = ("extractor", "edges", "generator", "user", "agent", "critic")

    def for_role(self, role: str) -> ModelSettings:
        """The role's own settings, else the default."""
        if role in self.ROLES and getattr(self, role) is not None:
            return getattr(self, role)
        return self.default


class StagesSpec(StrictModel):
    extractor: PluginRef | None = None
    sampler: PluginRef | None = None
    generator: PluginRef | None = None
    simulator: PluginRef | None = None
    critic: PluginRef | None = None


class PipelineSpec(StrictModel):
    """A whole run: environment, agent under test, models, stages and reports."""

    environment: str | None = Field(default=None, description="Environment name or folder.")
    agent: PluginRef = Field(default_factory=lambda: PluginRef(use="openai-tools"),
                             description="The agent under test.")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    stages: StagesSpec = Field(default_factory=StagesSpec)
    report: list[str] = Field(default_factory=lambda: ["html", "json", "csv"])
    seed: int = Field(default=0, description="Drives every random choice of the run.")
