"""Finding an environment by registered name or by folder."""

from __future__ import annotations

from pathlib import Path

from intellagent.registry import Registry


def environment_path(registry: Registry, target: str) -> Path:
    """``target`` as a folder (or its environment.yaml) when it exists, else a registered name."""
    path = Path(target)
    if path.exists() or "/" in target and not _looks_like_name(target):
        return path
    return Path(registry.resolve("environment", target).value)


def _looks_like_name(target: str) -> bool:
    namespace, _, name = target.partition("/")
    return bool(namespace) and bool(name) and "/" not in name and not target.startswith(".")
