"""APIGen-MT's prompt files (Jinja2, in ``prompts/``), each replaceable by a file of the same name
in a step's ``prompts:`` folder; their text is part of the items' cache key."""

from pathlib import Path

from intellagent.prompts import PromptFiles

BUILTIN = Path(__file__).parent / "prompts"


def prompts(override: str | None, *names: str) -> PromptFiles:
    return PromptFiles(BUILTIN, names, override)
