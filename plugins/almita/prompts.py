"""ALMITA's prompts: Jinja2 templates in ``prompts/`` beside the steps, each replaceable by a file
of the same name in a step's ``prompts:`` folder. The texts a step renders are part of its items'
cache key, so an edited prompt re-runs what it shapes."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

BUILTIN = Path(__file__).parent / "prompts"


@lru_cache(maxsize=32)
def _environment(override: str | None) -> jinja2.Environment:
    folders = ([override] if override else []) + [str(BUILTIN)]
    return jinja2.Environment(loader=jinja2.FileSystemLoader(folders), undefined=jinja2.StrictUndefined,
                              autoescape=False, keep_trailing_newline=False)


class Prompts:
    """The templates of one step, with the folder of the user's replacements (or None)."""

    def __init__(self, override: str | None, names: tuple[str, ...]) -> None:
        self.override = str(Path(override).resolve()) if override else None
        self.names = names

    def render(self, name: str, **values: Any) -> str:
        assert name in self.names, name
        return _environment(self.override).get_template(name).render(**values).strip()

    def messages(self, name: str, **values: Any) -> list[dict[str, str]]:
        """The system prompt and the rendered template as a chat."""
        return [{"role": "system", "content": self.render("system.md")},
                {"role": "user", "content": self.render(name, **values)}]

    def fingerprint(self) -> dict[str, str]:
        env = _environment(self.override)
        out = {}
        for name in self.names:
            source, _, _ = env.loader.get_source(env, name)
            out[name] = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        return out


def check_folder(value: str | None) -> str | None:
    if value is not None and not Path(value).is_dir():
        raise ValueError(f"prompts folder '{value}' not found")
    return value
