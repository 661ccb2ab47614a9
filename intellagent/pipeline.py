"""The pipeline spec: named steps wired by name, the agent under test, models, metrics, reports.

A spec is data. Each step names its plugin (``use``), its options (``with``), where its inputs
come from (``from``: other steps) and whether it runs once or per item of another step's output
(``each``). The engine resolves and type-checks the wiring (:mod:`intellagent.plan`) and runs it
(:mod:`intellagent.runner`); the chain's length and shape are the pipeline's business.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, field_validator

from intellagent.bounds import MAX_PARALLEL, MAX_PRICE, MAX_ROUNDS, MAX_SECONDS
from intellagent.model import HttpURL, StrictModel


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(base_url: Any) -> bool:
    """``base_url`` (text or a parsed URL) is on this machine: a model served locally, the test
    server."""
    host = (urlparse(str(base_url)).hostname or "") if base_url else ""
    return host in LOOPBACK or host.startswith("127.")


class PluginRef(StrictModel):
    """A plugin by name (``weighted-walk`` or ``acme/weighted-walk``) and its options."""

    use: str
    with_: dict[str, Any] = Field(default_factory=dict, alias="with",
                                  description="Options, checked by the plugin's own config model.")


class ExecutorRef(PluginRef):
    """The executor: ``local`` unless named, so ``executor: {with: {...}}`` gives the local
    one's options."""

    use: str = "local"


class StepSpec(PluginRef):
    """One step: a plugin of a stage kind, its options, and its wiring."""

    from_: str | list[str] | dict[str, str] | None = Field(
        default=None, alias="from",
        description="Steps whose outputs feed this step's inputs: a step name, a list of them "
                    "(each bound to the input of matching type), or {input: step}.")
    each: str | dict[str, str] | None = Field(
        default=None, description="Run once per item of this step's output (a list, or a step "
                                  "that itself runs per item); or {input: step}.")
    description: str | None = None


class ModelSettings(StrictModel):
    """One model endpoint. Keys come from environment variables only."""

    model: str = Field(description="e.g. 'gpt-4o-mini' or 'mock/schema'.")
    provider: str | None = Field(default=None, description="LLM provider plugin (openai, litellm, "
                                 "mock, or a plugin's); default 'mock' for mock/... models, else "
                                 "'openai'.")
    options: dict[str, Any] = Field(default_factory=dict, description="Provider-specific options "
                                    "(e.g. replies for mock/scripted, function for mock/function).")
    base_url: HttpURL | None = Field(default=None, description="The endpoint: any OpenAI-compatible "
                                     "one (provider openai), or the API base LiteLLM posts to "
                                     "(provider litellm).")
    api_key_env: str | None = Field(default=None, description="Name of the environment variable "
                                                              "holding the API key.")
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000, description="Output cap of "
                                   "every call of this model, in tokens. Unset: structured calls get "
                                   "a cap sized from their response model; chat calls none.")
    structured: Literal["auto", "tools", "json_schema", "json"] = Field(
        default="auto", description="How structured output is asked for: a forced tool call "
        "(tools), a JSON-Schema response format (json_schema), JSON mode with the schema in the "
        "prompt (json), or auto: probe the endpoint once and keep the first mode that works "
        "(tools on the OpenAI API itself).")
    timeout: float | None = Field(default=None, gt=0, le=MAX_SECONDS, description="Seconds per "
                                  "request for this model, over llm.timeout.")
    api_key: str | None = Field(default=None, description="Refused: name an environment variable "
                                                          "with api_key_env instead.")

    @property
    def provider_name(self) -> str:
        """The provider plugin that serves it: ``provider``, else mock for ``mock/`` models and
        openai for the rest."""
        return self.provider or ("mock" if self.model.startswith("mock/") else "openai")

    @field_validator("model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a model name cannot be empty (e.g. gpt-4o-mini or mock/schema)")
        if value != value.strip():
            raise ValueError(f"model name {value!r} has spaces around it")
        return value

    @field_validator("api_key")
    @classmethod
    def _no_literal_keys(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError("API keys are not accepted in YAML; put the key in an environment "
                             "variable and name it with api_key_env")
        return None

    def fingerprint(self) -> dict[str, Any]:
        """What shapes the answers (not how long we wait or where the key is)."""
        return self.model_dump(exclude={"timeout", "api_key_env", "api_key"})


class Price(StrictModel):
    """A model's price, each a finite number of dollars (a string, a boolean or .inf is refused:
    an infinite price made every call's cost NaN, which the store could not record). One that
    leaves out input or output is merged over the genai-prices table's price of the model (which
    must know it)."""

    input: float | None = Field(default=None, ge=0, le=MAX_PRICE, strict=True, allow_inf_nan=False,
                                description="Dollars per million prompt tokens (left out: the "
                                            "genai-prices table's).")
    output: float | None = Field(default=None, ge=0, le=MAX_PRICE, strict=True, allow_inf_nan=False,
                                 description="Dollars per million completion tokens (left out: the "
                                             "genai-prices table's).")
    cached_input: float | None = Field(default=None, ge=0, le=MAX_PRICE, strict=True, allow_inf_nan=False,
                                       description="Dollars per million prompt tokens read from the "
                                                   "provider's prompt cache (left out: the input "
                                                   "price, or the table's where input or output is "
                                                   "left out too).")


class LLMSettings(StrictModel):
    """A default model, optional overrides per role, and the limits shared by all steps.

    Roles are declared by the steps and agents that use them; ``roles`` may name only those.
    """

    default: ModelSettings = Field(default_factory=lambda: ModelSettings(model="mock/schema"))
    roles: dict[str, ModelSettings] = Field(default_factory=dict, description="Per-role models, "
                                            "e.g. {critic: {model: gpt-4.1}}; the roles a pipeline "
                                            "declares are listed by `intellagent validate`.")
    max_concurrency: int = Field(default=16, ge=1, le=MAX_PARALLEL,
                                 description="Requests in flight at once.")
    requests_per_minute: int | None = Field(default=None, ge=1, le=10_000_000)
    tokens_per_minute: int | None = Field(default=None, ge=1, le=10_000_000_000)
    max_retries: int = Field(default=5, ge=0, le=MAX_ROUNDS, description="Retries of a transient fault.")
    validation_retries: int = Field(default=2, ge=0, le=MAX_ROUNDS, description="Re-asks when "
                                    "structured output does not fit, with the error.")
    backoff_base: float = Field(default=0.5, gt=0, le=MAX_SECONDS,
                                description="Seconds; doubles per retry.")
    backoff_max: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    timeout: float = Field(default=120.0, gt=0, le=MAX_SECONDS, description="Seconds per request (a "
                           "model's own timeout wins); the HTTP request is cut after it.")
    deadline: float = Field(default=300.0, gt=0, le=86_400, description="Seconds one call may take "
                            "with all its retries and back-off; a request in flight then is cut.")
    budget_usd: float | None = Field(default=None, ge=0, le=1_000_000, description="Dollars the run "
                                     "may spend: a call is launched only if its worst case (prompt "
                                     "and output cap at the model's price) fits in what is left; 0 "
                                     "lets only free calls (mock and local models) go.")
    budget_tokens: int | None = Field(default=None, ge=0, le=1_000_000_000_000)
    cache: bool = True
    prices: dict[str, Price] = Field(default_factory=dict, description="Prices by model name (its "
                                     "dated snapshots and provider/ spellings too) or by a prefix "
                                     "ending in *, over the maintained table of genai-prices: a "
                                     "model neither knows has no price (a dollar budget refuses "
                                     "it).")

    def for_role(self, role: str) -> ModelSettings:
        """The role's own settings, else the default."""
        return self.roles.get(role) or self.default

    def with_model(self, model: str) -> "LLMSettings":
        """Every role on ``model`` (``--model``)."""
        return self.model_copy(update={
            "default": self.default.model_copy(update={"model": model}),
            "roles": {r: s.model_copy(update={"model": model}) for r, s in self.roles.items()}})


class PipelineSpec(StrictModel):
    """A whole run: environment, agent under test, models, steps, metrics and reports."""

    description: str = ""
    environment: str | None = Field(default=None, description="Environment name or folder.")
    agent: PluginRef = Field(default_factory=lambda: PluginRef(use="openai-tools"),
                             description="The agent under test (for steps that talk to it).")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    steps: dict[str, StepSpec] = Field(description="Named steps; each names its plugin and the "
                                                   "steps it consumes.")
    metrics: dict[str, PluginRef] | list[str | PluginRef] = Field(
        default_factory=dict, description="Metric plugins reducing the items' scores: "
                                          "{name: {use, with}} or a list of plugin names.")
    report: list[str | PluginRef] = Field(
        default_factory=lambda: ["html", "json", "csv"],
        description="Reporters writing the run's report: plugin names, or {use, with} for one with "
                    "options (html: items_per_page).")
    gates: list[str] = Field(default_factory=list, description="Thresholds that decide a CI job: "
                             "'PATH OP NUMBER' on the run's metrics ('success >= 0.8', "
                             "'by-category.authentication >= 0.9'); a run whose gate fails exits "
                             "1 (docs/ci.md).")
    params: dict[str, str] = Field(default_factory=dict, description="Command-line shortcuts: "
                                   "{events: steps.specs.with.events} makes `--events N` set it.")
    executor: ExecutorRef = Field(default_factory=ExecutorRef,
                                description="How per-item work is spread: local (asyncio, the "
                                            "default), processes, ray.")
    store: str | None = Field(default=None, description="The store's SQLAlchemy URL, e.g. "
                              "postgresql://user@host/db (default: intellagent.db in the workspace); "
                              "--store and INTELLAGENT_STORE override it. No password here: libpq "
                              "reads PGPASSWORD or ~/.pgpass.")
    seed: int = Field(default=0, ge=-2**63, lt=2**63, description="Drives every random choice of "
                      "the run.")

    @field_validator("store")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None:
            from intellagent.store import url_password
            from intellagent.store.connection import url_problem

            problem = url_problem(value)
            if problem:
                raise ValueError(problem)
            if url_password(value):
                raise ValueError("passwords are not accepted in YAML; give the URL without one and "
                                 "set PGPASSWORD (or ~/.pgpass), or pass the URL in INTELLAGENT_STORE")
        return value

    @field_validator("steps")
    @classmethod
    def _some_steps(cls, value: dict[str, StepSpec]) -> dict[str, StepSpec]:
        if not value:
            raise ValueError("a pipeline needs at least one step")
        return value

    def metric_refs(self) -> dict[str, PluginRef]:
        """The metrics as {name: ref}; a bare plugin name is named after the plugin."""
        if isinstance(self.metrics, dict):
            return dict(self.metrics)
        out: dict[str, PluginRef] = {}
        for entry in self.metrics:
            ref = PluginRef(use=entry) if isinstance(entry, str) else entry
            out[ref.use.split("/")[-1]] = ref
        return out
