"""README and the documentation site's pages (docs/), read as the tests that keep them true
read them."""

from __future__ import annotations

import re

from tests.conftest import REPO

DOCS = REPO / "docs"


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def page(path: str) -> str:
    """A page of the site by its path under docs/ (``writing/pipeline.md``)."""
    return (DOCS / path).read_text(encoding="utf-8")


def pages() -> dict[str, str]:
    """Every page of the site by its path under docs/, hooks left out."""
    return {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(DOCS.rglob("*.md")) if "hooks" not in p.relative_to(DOCS).parts}


def section(text: str, heading: str) -> str:
    """The section of ``text`` under ``heading`` (a whole heading line, e.g. ``## Local models``)
    up to the next heading of its level or a higher one, code blocks skipped."""
    level = len(heading) - len(heading.lstrip("#"))
    lines, fence, found = text.splitlines(), False, None
    for n, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            depth = len(line) - len(line.lstrip("#"))
            if found is None and line.strip() == heading:
                found = n
            elif found is not None and depth <= level and line[depth:depth + 1] == " ":
                return "\n".join(lines[found:n])
    if found is None:
        raise AssertionError(f"no section {heading!r}")
    return "\n".join(lines[found:])


def fenced(text: str, language: str) -> list[str]:
    """The code blocks of ``text`` in ``language``."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)
