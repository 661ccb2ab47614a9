"""Finding an environment by registered name or by folder."""

from __future__ import annotations

from pathlib import Path

from intellagent.errors import IntellagentError
from intellagent.registry import Registry

MANIFEST = "environment.yaml"


def is_environment_folder(path: Path) -> bool:
    return path.name == MANIFEST and path.is_file() or (path / MANIFEST).is_file()


def environment_path(registry: Registry, target: str) -> Path:
    """``target`` as an environment folder (or its environment.yaml) when it is one, else a
    registered name. A folder that is not an environment does not hide a registered name (the
    project folder ``shop/`` made by ``new-env shop`` beside the installed ``shop``)."""
    path = Path(target)
    if is_environment_folder(path):
        return path
    if _looks_like_name(target):
        try:
            return Path(registry.resolve("environment", target).value)
        except IntellagentError:
            if not path.exists():
                raise
    return path  # the loader says what is wrong with it


def _looks_like_name(target: str) -> bool:
    namespace, _, name = target.partition("/")
    if not name:
        return bool(namespace) and not target.startswith(".")
    return bool(namespace) and "/" not in name and not target.startswith(".")
