"""The pipeline spec: which plugin runs each stage, with which options and models."""

from __future__ import annotations

from typing import Any

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


class LLMSettings(StrictModel):
    """A default model and optional overrides per role."""

    default: ModelSettings = Field(default_factory=lambda: ModelSettings(model="mock/schema"))
    extractor: ModelSettings | None = None
    edges: ModelSettings | None = None
    generator: ModelSettings | None = None
    user: ModelSettings | None = None
    agent: ModelSettings | None = None
    critic: ModelSettings | None = None


class StagesSpec(StrictModel):
    extractor: PluginRef | None = None
    sampler: PluginRef | None = None
    generator: PluginRef | None = None
    simulator: PluginRef | None = None
    critic: PluginRef | None = None


class PipelineSpec(StrictModel):
    """A whole run: environment, agent under test, models, stages and reports."""

    environment: str | None = Field(default=None, description="Environment name or folder.")
    agent: PluginRef | None = None
    llm: LLMSettings = Field(default_factory=LLMSettings)
    stages: StagesSpec = Field(default_factory=StagesSpec)
    report: list[str] = Field(default_factory=lambda: ["html", "json", "csv"])
    seed: int = Field(default=0, description="Drives every random choice of the run.")
