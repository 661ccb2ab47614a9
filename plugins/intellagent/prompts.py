"""The IntellAgent pipeline's prompts: Jinja2 templates in ``prompts/`` beside the steps, each
replaceable by a file of the same name in a step's ``prompts:`` folder (the engine's
:class:`~intellagent.prompts.PromptFiles`)."""

from __future__ import annotations

from pathlib import Path

from intellagent.prompts import PromptFiles

BUILTIN = Path(__file__).parent / "prompts"


class Prompts(PromptFiles):
    """The templates ``names`` of one step, with the folder of the user's replacements (or None)."""

    def __init__(self, override: str | None, names: tuple[str, ...], builtin: Path = BUILTIN) -> None:
        super().__init__(builtin, names, override)
