"""Paths that inputs name, kept inside the folder they belong to.

- An environment's paths (its prompt, schema, seed data, tools file, tool implementations,
  validators, checks, seed loader) are relative to its folder and must resolve inside it.
- A path a pipeline *file* names (a step's prompts folder, a task file, a folder of
  conversations, a ``file.py:function`` of an agent or a model) is relative to the folder the
  command runs in and must resolve inside it.
- A path given on the command line (``--set``, a pipeline's own ``--PARAM``, ``--data``,
  ``--prompt``) is the user's own choice: relative to the current folder, and may be anywhere.
  Code is the exception: a ``file.py`` runs only from inside the current folder (or is an
  importable module).

Symbolic links are followed before the check, so a link inside a folder that points out of it is
outside. :class:`PathRules` is the validation context a plan gives a plugin's options, so path
options (:func:`path_option`) know where their value came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ValidationInfo


def inside(base: str | Path, rel: str | Path) -> Path | None:
    """``rel`` resolved against ``base`` with symbolic links followed, or None when the result
    is not inside ``base`` (an absolute ``rel`` stands for itself)."""
    root = Path(base).resolve()
    try:
        path = (root / Path(rel).expanduser()).resolve()
    except (OSError, RuntimeError):  # a link loop
        return None
    return path if path.is_relative_to(root) else None


@dataclass(frozen=True)
class PathRules:
    """How a pipeline's path options are checked: relative to ``base`` (the current folder);
    those a pipeline file set must stay inside it, those in ``flagged`` (set on the command line,
    or every option when ``flagged`` is True) may point anywhere."""

    base: Path = field(default_factory=Path.cwd)
    flagged: frozenset[str] | bool = frozenset()

    def from_flag(self, option: str | None) -> bool:
        return self.flagged is True or (option is not None and option in self.flagged)  # type: ignore[operator]


def rules_of(info: ValidationInfo | None) -> PathRules | None:
    """The path rules a plan put into the validation context (None: a plugin built in code)."""
    context = info.context if info is not None else None
    rules = context.get("paths") if isinstance(context, dict) else None
    return rules if isinstance(rules, PathRules) else None


def check_contained(value: str, what: str, info: ValidationInfo | None = None) -> Path:
    """The folder ``value`` is relative to; raises ValueError when a pipeline file gave a value
    that leaves it."""
    rules = rules_of(info)
    if rules is None:
        return Path.cwd()
    if not rules.from_flag(info.field_name if info else None) and inside(rules.base, value) is None:
        raise ValueError(f"{what} '{value}' points outside the current folder (a path in a "
                         "pipeline file must stay inside the folder the command runs in; give "
                         "another one on the command line, with --set)")
    return rules.base


def check_path(value: str, kind: Literal["file", "folder"], what: str,
               info: ValidationInfo | None = None) -> str:
    """``value`` if it names an existing ``kind`` where it may (see the module's docstring);
    raises ValueError saying why not."""
    base = check_contained(value, what, info)
    path = base / Path(value).expanduser()
    found = path.is_dir() if kind == "folder" else path.is_file()
    if not found:
        if path.exists():
            raise ValueError(f"{what} '{value}' is a {'file' if kind == 'folder' else 'folder'}, "
                             f"expected a {kind}")
        raise ValueError(f"{what} '{value}' not found")
    return value


def path_option(kind: Literal["file", "folder"], what: str) -> Any:
    """The type of an option naming a file or folder (or None): it must exist, and a value a
    pipeline file gives must stay inside the current folder."""
    def check(value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_path(value, kind, what, info)
    return Annotated[str | None, AfterValidator(check)]
