"""Rows that point at each other, for anything that writes rows (a generator making a scenario's
data): the lists a schema declares with ``lists:`` kept in step with the foreign keys they
mirror, and a row copied as a new one with fresh identifying values (its key and its ``unique``
columns, in the shape of the originals; the lists it owned emptied, since those rows belong to
the original)."""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from intellagent.environment.database import Database, _q
from intellagent.environment.dbschema import DatabaseSchema


@dataclass(frozen=True)
class Link:
    """``parent.column`` lists the keys of the ``child`` rows whose ``foreign_key`` is the parent."""

    parent: str
    column: str
    child: str
    foreign_key: str


def links(schema: DatabaseSchema) -> list[Link]:
    out = []
    for tname, table in schema.tables.items():
        for cname, col in table.columns.items():
            if col.lists:
                child, fk = col.lists.split(".")
                out.append(Link(tname, cname, child, fk))
    return out


def redraw(value: str, rng: random.Random, taken: Callable[[str], bool]) -> str:
    """A value of the same shape as ``value`` that is not ``taken``: its digits redrawn (its
    letters, when it has no digit; an email's part before the @ only)."""
    head, at, tail = value.partition("@")
    if not at:
        head, tail = value, ""
    has_digits = any(c.isdigit() for c in head)
    for attempt in range(200):
        chars = []
        for c in head:
            if c.isdigit():
                chars.append(rng.choice(string.digits))
            elif c.isalpha() and not has_digits:
                chars.append(rng.choice(string.ascii_uppercase if c.isupper() else string.ascii_lowercase))
            else:
                chars.append(c)
        if not has_digits and at and attempt == 0:
            chars += [rng.choice(string.digits) for _ in range(3)]
        if attempt >= 50:  # a crowded shape: grow it
            chars += [rng.choice(string.digits) for _ in range(1 + attempt // 50)]
        candidate = "".join(chars) + (at + tail if at else "")
        if candidate != value and not taken(candidate):
            return candidate
    raise ValueError(f"no fresh value in the shape of {value!r}")


def fresh_key(db: Database, table: str, like: str, rng: random.Random,
              reserved: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """A key for a new row of ``table`` in the shape of ``like``."""
    return redraw(like, rng, lambda k: k in reserved or db.has(table, k))


def copy_as_new(db: Database, table: str, template_key: str, key: str,
                rng: random.Random) -> dict[str, Any]:
    """The record of ``template_key`` as a new row under ``key``: fresh values in its unique
    columns, empty lists of the rows the template owns."""
    t = db.schema.tables[table]
    record = db.get(table, template_key)  # decoded afresh: the caller's own to change
    if record is None:
        raise KeyError(f"{table}[{template_key!r}] does not exist")
    if t.key_in_record:
        record[t.primary_key] = key
    for cname, col in t.columns.items():
        if cname == t.primary_key or cname not in record:
            continue
        if col.lists:
            record[cname] = []
        elif col.unique and isinstance(record[cname], str):
            record[cname] = redraw(record[cname], rng, lambda v, c=cname: bool(db.select(table, **{c: v})))
    return record


def sync_links(db: Database, rows: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """For every (table, key) in ``rows`` of a child table: the parent its foreign key names lists
    it (appended), and no other parent does. Returns the parent rows changed."""
    by_child: dict[str, list[Link]] = {}
    for link in links(db.schema):
        by_child.setdefault(link.child, []).append(link)
    changed: list[tuple[str, str]] = []
    for table, key in rows:
        record = db.get(table, key)
        if record is None:
            continue
        for link in by_child.get(table, []):
            owner = record.get(link.foreign_key)
            parent_pk = db.schema.tables[link.parent].primary_key
            holders = [r[0] for r in db.execute(
                f"SELECT {_q(parent_pk)} FROM {_q(link.parent)} WHERE {_q(link.column)} LIKE ?",
                (f"%{json.dumps(key)}%",))]
            for parent_key in holders:
                if parent_key == owner:
                    continue
                parent = db.get(link.parent, parent_key)
                if key in (parent.get(link.column) or []):
                    parent[link.column] = [k for k in parent[link.column] if k != key]
                    db.put(link.parent, parent_key, parent)
                    changed.append((link.parent, parent_key))
            if owner is not None:
                parent = db.get(link.parent, owner)
                if parent is not None and key not in (parent.get(link.column) or []):
                    parent[link.column] = list(parent.get(link.column) or []) + [key]
                    db.put(link.parent, owner, parent)
                    changed.append((link.parent, owner))
    return changed
