"""APIGen-MT's prompt files (Jinja2, in ``prompts/``), each replaceable by a file of the same name
in a step's ``prompts:`` folder; their text is part of the items' cache key."""

from pathlib import Path

from intellagent_plugins.intellagent.prompts import Prompts as _Prompts
from intellagent_plugins.intellagent.prompts import check_folder  # noqa: F401  (re-exported)

BUILTIN = Path(__file__).parent / "prompts"


def prompts(override: str | None, *names: str) -> _Prompts:
    return _Prompts(override, names, builtin=BUILTIN)
