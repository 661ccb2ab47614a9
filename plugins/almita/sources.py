"""A team's own intents and procedures, read from files.

- An **intents file** (``--intents FILE``): one intent a line (``#`` comments, blank lines and
  list markers ``-``, ``*``, ``1.`` ignored; ``name: description`` keeps a description), or a
  YAML/JSON list of names or of ``{name, description}``.
- A **procedures folder** (``--procedures DIR``, or ``procedures/`` of the environment): one
  Markdown file per procedure. Optional front matter names its intent and the APIs it needs::

      ---
      intent: order not received
      apis: [get_order, cancel_order, refund_order]
      ---
      # Order not received
      1. Ask for the order id and look the order up with get_order. ...

  Without ``intent`` the first ``#`` heading (else the file name) is the intent; files with the
  same intent are its procedures. The APIs are looked up in ``apis.yaml`` (or ``tools.yaml``)
  beside the procedures, else in the environment's tools; without ``apis`` they are extracted
  from the text by the ``apis`` step, as the paper does.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from ruamel.yaml.error import YAMLError

from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.yamlio import check_expansion, line_of, read_yaml, safe_yaml
from intellagent_plugins.almita.artefacts import Api, Intent, Procedure

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def slug(name: str) -> str:
    """``Order not received!`` → ``order-not-received``."""
    text = re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")
    return text[:48].rstrip("-") or "intent"


def read_intents(path: str | Path) -> list[Intent]:
    """The intents listed in ``path`` (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("intents file not found", file=path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=path) from None
    entries: list[tuple[str, str, int | None]] = []
    if path.suffix in (".yaml", ".yml", ".json"):
        data = read_yaml(path)
        if not isinstance(data, list):
            raise ConfigError("expected a list of intents (names, or {name, description})", file=path, line=1)
        for i, entry in enumerate(data):
            line = line_of(data, (i,))
            if isinstance(entry, str):
                entries.append((entry, "", line))
            elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
                entries.append((entry["name"], str(entry.get("description") or ""), line))
            else:
                raise ConfigError("an intent is a name or {name, description}", file=path, line=line)
    else:
        for number, raw in enumerate(text.splitlines(), 1):
            line = LIST_MARKER.sub("", raw.split("#", 1)[0] if raw.lstrip().startswith("#") else raw).strip()
            if not line:
                continue
            name, _, description = line.partition(":")
            entries.append((name.strip(), description.strip(), number))
    intents: dict[str, Intent] = {}
    for name, description, line in entries:
        if not name.strip():
            raise ConfigError("an intent without a name", file=path, line=line)
        ident = slug(name)
        if ident in intents:
            raise ConfigError(f"intent {name!r} is listed twice", file=path, line=line)
        intents[ident] = Intent(id=ident, name=name.strip(), description=description)
    if not intents:
        raise ConfigError("lists no intent", file=path)
    return list(intents.values())


class ApiEntry(StrictModel):
    """An API in ``apis.yaml``; a tools.yaml of an environment reads as well (its implementation
    and flags are ignored: the tests never run an API)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output: str | None = None
    returns: dict[str, Any] | None = None
    implementation: str | None = None
    action: bool = False
    terminal: bool = False

    def api(self) -> Api:
        output = self.output or (self.returns or {}).get("description") or (self.returns or {}).get("type", "")
        return Api(name=self.name, description=self.description, parameters=self.parameters, output=str(output))


def read_api_catalogue(folder: Path) -> dict[str, Api] | None:
    """The APIs in ``folder/apis.yaml`` (or ``tools.yaml``), or None when there is none."""
    for name in ("apis.yaml", "tools.yaml"):
        path = folder / name
        if path.is_file():
            break
    else:
        return None
    data = read_yaml(path)
    entries = data.get("tools", data.get("apis")) if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ConfigError("expected a list of APIs (or `apis:` / `tools:` holding one)", file=path, line=1)
    catalogue: dict[str, Api] = {}
    for i, entry in enumerate(entries):
        try:
            api = ApiEntry.model_validate(entry).api()
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"API {i + 1}: {where}: {err['msg']}" if where else err["msg"], file=path,
                              line=line_of(entries, (i,))) from None
        catalogue[api.name] = api
    return catalogue


def split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    found = FRONT_MATTER.match(text)
    if not found:
        return {}, text
    try:
        meta = check_expansion(safe_yaml().load(found.group(1)), path, 2) or {}
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", file=path,
                          line=mark.line + 2 if mark else 1) from None
    if not isinstance(meta, dict):
        raise ConfigError("front matter must be a mapping (intent:, apis:)", file=path, line=2)
    unknown = sorted(set(meta) - {"intent", "description", "apis"})
    if unknown:
        raise ConfigError(f"unknown front-matter key '{unknown[0]}' (intent, description, apis)", file=path, line=2)
    return meta, text[found.end():]


def read_procedures(folder: str | Path, tools: dict[str, Api] | None = None) -> list[Intent]:
    """The intents of the procedure files in ``folder``, each with its procedures (P1, P2, … in
    file-name order). ``tools``: the environment's APIs, for files whose ``apis`` are not in the
    folder's own catalogue."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError("procedures folder not found", file=folder)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".md", ".markdown") and p.is_file()
                   and p.name.lower() != "readme.md")
    if not files:
        raise ConfigError("holds no procedure (*.md)", file=folder)
    catalogue = read_api_catalogue(folder)
    intents: dict[str, Intent] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=path) from None
        meta, body = split_front_matter(text, path)
        heading = re.search(r"^#\s+(.+?)\s*#*\s*$", body, re.MULTILINE)
        name = str(meta.get("intent") or (heading.group(1) if heading else path.stem.replace("-", " ").replace("_", " ")))
        if not body.strip():
            raise ConfigError("the procedure is empty", file=path)
        apis = None
        if meta.get("apis") is not None:
            names = meta["apis"]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ConfigError("apis: a list of API names", file=path, line=2)
            known = {**(tools or {}), **(catalogue or {})}
            missing = [n for n in names if n not in known]
            if missing:
                where = "apis.yaml beside the procedures" if catalogue is not None else "the environment's tools"
                raise ConfigError(f"API '{missing[0]}' is not in {where} (known: {', '.join(sorted(known)) or 'none'})",
                                  file=path, line=2)
            apis = [known[n] for n in names]
        ident = slug(name)
        intent = intents.setdefault(ident, Intent(id=ident, name=name, description=str(meta.get("description") or "")))
        intent.procedures.append(Procedure(id=f"P{len(intent.procedures) + 1}", intent=ident, intent_name=name,
                                           text=body.strip(), apis=apis, source=path.name))
    return list(intents.values())


def files_digest(*paths: str | Path | None) -> str | None:
    """A hash of the given files (every file of a folder), for a step's cache key."""
    digest = hashlib.sha256()
    seen = False
    for p in paths:
        if p is None:
            continue
        path = Path(p)
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                seen = True
                digest.update(json.dumps([str(f.relative_to(path) if path.is_dir() else f.name)]).encode())
                digest.update(f.read_bytes())
        if not path.exists():
            digest.update(f"missing:{path}".encode())
            seen = True
    return digest.hexdigest() if seen else None
