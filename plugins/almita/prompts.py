"""ALMITA's prompts: Jinja2 templates in ``prompts/`` beside the steps, each replaceable by a file
of the same name in a step's ``prompts:`` folder (the engine's
:class:`~intellagent.prompts.PromptFiles`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intellagent.prompts import PromptFiles

BUILTIN = Path(__file__).parent / "prompts"


class Prompts(PromptFiles):
    """The templates of one step, with the folder of the user's replacements (or None)."""

    def __init__(self, override: str | None, names: tuple[str, ...]) -> None:
        super().__init__(BUILTIN, names, override)

    def messages(self, name: str, **values: Any) -> list[dict[str, str]]:
        """The system prompt and the rendered template as a chat."""
        return [{"role": "system", "content": self.render("system.md")},
                {"role": "user", "content": self.render(name, **values)}]
