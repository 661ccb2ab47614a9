"""``new-env``: render a project template into a standalone, pip-installable environment package,
and re-apply a newer template to a project made earlier (copier-style answers file)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from ruamel.yaml import YAML

from intellagent import __version__
from intellagent.errors import ConfigError, IntellagentError
from intellagent.model import StrictModel
from intellagent.yamlio import load_model

ANSWERS_FILE = ".intellagent-answers.yml"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


class Answers(StrictModel):
    """What ``new-env`` asked and wrote, so ``--update`` can re-render and merge."""

    template: str
    template_digest: str
    intellagent_version: str
    answers: dict[str, str]
    files: dict[str, str]  # path → sha256 of what the template wrote


@dataclass
class UpdateResult:
    updated: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise IntellagentError(
            f"invalid environment name {name!r}: use lower-case letters, digits, '-' and '_', "
            "starting with a letter (no paths)", item="new-env NAME")
    return name


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def template_digest(template_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in template_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(template_dir).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def render(template_dir: Path, answers: dict[str, str]) -> dict[str, str]:
    """Every file of the template, rendered: relative path → text."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    out = {}
    for path in sorted(template_dir.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(template_dir).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel.endswith(".jinja"):
            rel = rel.removesuffix(".jinja")
            text = env.from_string(text).render(**answers)
        out[env.from_string(rel).render(**answers)] = text
    return out


def default_answers(name: str) -> dict[str, str]:
    return {"name": name, "package": name.replace("-", "_"),
            "distribution": name, "description": f"The {name} environment for IntellAgent."}


def create(template_name: str, template_dir: Path, name: str, dest_parent: Path) -> Path:
    """Write a new project ``dest_parent/name`` from the template."""
    check_name(name)
    dest = dest_parent / name
    if dest.exists() and any(dest.iterdir()):
        raise IntellagentError("folder exists and is not empty", file=dest)
    answers = default_answers(name)
    files = render(template_dir, answers)
    for rel, text in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _write_answers(dest, Answers(template=template_name, template_digest=template_digest(template_dir),
                                 intellagent_version=__version__, answers=answers,
                                 files={rel: _sha(text) for rel, text in files.items()}))
    return dest


def _write_answers(dest: Path, answers: Answers) -> None:
    yaml = YAML()
    yaml.default_flow_style = False
    with (dest / ANSWERS_FILE).open("w", encoding="utf-8") as fh:
        fh.write("# Written by `intellagent new-env`; `intellagent new-env --update` reads it.\n")
        yaml.dump(answers.model_dump(), fh)


def read_answers(project: Path) -> Answers:
    path = project / ANSWERS_FILE
    if not path.is_file():
        raise ConfigError(f"not a project made by new-env (no {ANSWERS_FILE})", file=project)
    return load_model(Answers, path)


def update(project: Path, template_dir: Path) -> UpdateResult:
    """Re-render the template with the recorded answers. Files the user has not touched are
    replaced; files the user changed are kept, and the template's new version is written next to
    them as ``<file>.new`` (a conflict to merge by hand)."""
    recorded = read_answers(project)
    files = render(template_dir, recorded.answers)
    result = UpdateResult()
    hashes = dict(recorded.files)
    for rel, text in files.items():
        target = project / rel
        new_hash = _sha(text)
        if not target.exists():
            if rel in recorded.files:
                continue  # the user deleted it on purpose
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            result.added.append(rel)
            hashes[rel] = new_hash
            continue
        current = _sha(target.read_text(encoding="utf-8"))
        if current == new_hash:
            hashes[rel] = new_hash
            continue
        if current == recorded.files.get(rel):
            target.write_text(text, encoding="utf-8")
            result.updated.append(rel)
            hashes[rel] = new_hash
        elif new_hash != recorded.files.get(rel):
            (project / f"{rel}.new").write_text(text, encoding="utf-8")
            result.conflicts.append(rel)
            hashes[rel] = new_hash  # the template's side is now seen; merging is the user's
    recorded.files = hashes
    recorded.template_digest = template_digest(template_dir)
    recorded.intellagent_version = __version__
    _write_answers(project, recorded)
    return result
