"""What defines what a run tested: the environment (and its content hash), the data and prompt
put in place of its own, the agent (its plugin, options, endpoint or callable, identity), each
role's model and endpoint, the pipeline (and its content hash), the seed and IntellAgent's
version. Reports and ``compare`` show it, so two runs never look alike when they are not.
No secret is in it: options hold the names of environment variables, never their values."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from intellagent.hashing import content_hash


class FileRef(BaseModel):
    """A file or folder a run read instead of the environment's own, and its content hash."""

    path: str
    sha256: str


class AgentRef(BaseModel):
    use: str
    options: dict[str, Any] = Field(default_factory=dict)
    endpoint: str = Field(default="", description="Its URL or callable.")
    identity: str | None = Field(default=None, description="Its version (declared, reported, or "
                                 "its code's hash), 'model' for a model-backed agent, or None for "
                                 "a black box.")
    mutant: str | None = Field(default=None, description="The fault the harness applied around "
                               "it (intellagent mutate), or None for the agent itself.")


class ModelRef(BaseModel):
    model: str
    provider: str | None = None
    base_url: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    temperature: float | None = None
    max_tokens: int | None = None


class Provenance(BaseModel):
    intellagent: str
    environment: str
    environment_version: str = ""
    environment_hash: str = Field(description="Of every file the environment is made of.")
    data: FileRef | None = None
    prompt: FileRef | None = None
    pipeline: str
    pipeline_hash: str = Field(description="Of the resolved pipeline spec.")
    agent: AgentRef | None = None
    models: dict[str, ModelRef] = Field(default_factory=dict, description="Each role's model.")
    seed: int
    replays: str | None = Field(default=None, description="The run whose recorded dialogs this "
                                "one replayed against its agent (intellagent replay).")

    def differences(self, other: "Provenance") -> list[str]:
        """One line per field that differs from ``other``'s (``self`` is A, ``other`` B)."""
        out = []
        a, b = self.model_dump(mode="json"), other.model_dump(mode="json")
        for key in a:
            if key == "models":
                for role in sorted(set(a[key]) | set(b[key])):
                    if a[key].get(role) != b[key].get(role):
                        out.append(f"model of {role}: {_brief(a[key].get(role))} → {_brief(b[key].get(role))}")
            elif a[key] != b[key]:
                out.append(f"{key.replace('_', ' ')}: {_brief(a[key])} → {_brief(b[key])}")
        return out

    def unknown(self, other: "Provenance") -> list[str]:
        """What neither run can tell about what it tested, so that the same record is never read
        as the same agent: a black box (no version) may have changed between the runs."""
        a, b = self.agent, other.agent
        if a is not None and b is not None and a.identity is None and b.identity is None:
            return ["the agent under test is a black box (no version) in both runs: whether it "
                    "changed between them is not known"]
        return []


def safe_url(url: str | None) -> str | None:
    """``url`` without a password in it."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _brief(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_brief(v)}" for k, v in value.items() if v not in (None, {}, "", []))
    text = str(value)
    return text[:16] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def file_hash(path: str | Path) -> str:
    """The SHA-256 of a file, or of a folder's files (each relative path and its content)."""
    path = Path(path)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def provenance_of(plan: Any, env: Any, llm: Any, agent: Any, version: str,
                  replays: str | None = None) -> Provenance:
    """The provenance of running ``plan`` on ``env`` with the prepared ``agent``."""
    source = getattr(env, "_source", {}) or {}
    refs = {k: FileRef(path=str(Path(source[k]).resolve()), sha256=file_hash(source[k]))
            for k in ("data", "prompt") if source.get(k)}
    agent_ref = None
    if plan.agent is not None and any(s.uses_agent for s in plan.steps.values()):
        options = plan.agent_config.model_dump(mode="json") if plan.agent_config is not None else {}
        if isinstance(options.get("url"), str):
            options["url"] = safe_url(options["url"])
        mutant = getattr(plan, "mutant", None)
        agent_ref = AgentRef(use=plan.agent.name, options=options, endpoint=safe_url(agent.describe) or "",
                             identity=agent.identity, mutant=mutant.name if mutant is not None else None)
    models = {}
    for role in sorted(plan.roles):
        s = llm.settings_for(role)
        models[role] = ModelRef(model=s.model, provider=s.provider, base_url=safe_url(s.base_url),
                                options=s.options, temperature=s.temperature, max_tokens=s.max_tokens)
    spec = plan.spec.model_dump(mode="json", by_alias=True, exclude={"executor"})
    return Provenance(intellagent=version, environment=env.name, environment_version=env.version,
                      environment_hash=env.fingerprint(), data=refs.get("data"),
                      prompt=refs.get("prompt"), pipeline=plan.name,
                      pipeline_hash=content_hash(spec), agent=agent_ref, models=models,
                      seed=plan.spec.seed, replays=replays)
