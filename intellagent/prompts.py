"""A step's prompt files: Jinja2 templates in the folders the step ships (a subclass's own
before its base's), each replaceable by a file of the same name in a folder the user names (a
step's ``prompts:`` option). The text of every
template a step renders belongs in its cache key (:meth:`PromptFiles.fingerprint`, returned from
the step's ``fingerprint()``), so an edited prompt re-runs exactly what it shapes."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Iterable, Sequence

import jinja2
from pydantic import AfterValidator


@lru_cache(maxsize=64)
def _environment(builtin: tuple[str, ...], override: str | None) -> jinja2.Environment:
    folders = ([override] if override else []) + list(builtin)
    return jinja2.Environment(loader=jinja2.FileSystemLoader(folders), undefined=jinja2.StrictUndefined,
                              autoescape=False, keep_trailing_newline=False)


class PromptFiles:
    """The templates ``names`` of one step: read from ``override`` (a folder of the user's, or
    None) where it has a file of that name, else from the first of the ``builtin`` folders (one
    folder, or several in order) that has it."""

    def __init__(self, builtin: Path | Sequence[Path], names: Iterable[str],
                 override: str | None = None) -> None:
        folders = [builtin] if isinstance(builtin, (str, Path)) else list(builtin)
        self.builtin = tuple(str(Path(f).resolve()) for f in folders)
        self.override = str(Path(override).resolve()) if override else None
        self.names = tuple(names)

    @property
    def _env(self) -> jinja2.Environment:
        return _environment(self.builtin, self.override)

    def render(self, name: str, **values: Any) -> str:
        """Template ``name`` filled with ``values`` (a missing value is an error, not a blank)."""
        if name not in self.names:
            raise KeyError(f"'{name}' is not among this step's prompt files ({', '.join(self.names)})")
        return self._env.get_template(name).render(**values).strip()

    def source(self, name: str) -> str:
        """Template ``name``'s text as written (for an estimate of its size, no value filled)."""
        return self._env.loader.get_source(self._env, name)[0]

    def has(self, name: str) -> bool:
        """Whether a template ``name`` is there to read (the user's folder or a built-in one)."""
        try:
            self._env.loader.get_source(self._env, name)
        except jinja2.TemplateNotFound:
            return False
        return True

    def fingerprint(self) -> dict[str, str]:
        """The hash of every template this step renders, as it will be read."""
        env = self._env
        return {name: hashlib.sha256(env.loader.get_source(env, name)[0].encode("utf-8")).hexdigest()[:16]
                for name in self.names}


def check_prompts_folder(value: str | None) -> str | None:
    """A ``prompts:`` option's value: an existing folder, or None."""
    if value is not None and not Path(value).is_dir():
        raise ValueError(f"prompts folder '{value}' not found")
    return value


#: The type of a step's ``prompts:`` option: a folder that exists, or None.
PromptsFolder = Annotated[str | None, AfterValidator(check_prompts_folder)]
