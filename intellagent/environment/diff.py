"""What changed between two database states, field by field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from intellagent.environment.database import Database, Dump


class FieldChange(BaseModel):
    path: str = Field(description="Dotted path inside the record, e.g. 'payment_methods.gc_1.balance'.")
    before: Any = None
    after: Any = None


class TableDiff(BaseModel):
    added: dict[str, dict[str, Any]] = Field(default_factory=dict)
    removed: dict[str, dict[str, Any]] = Field(default_factory=dict)
    changed: dict[str, list[FieldChange]] = Field(default_factory=dict)


class DbDiff(BaseModel):
    tables: dict[str, TableDiff] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.tables

    def summary(self) -> str:
        parts = []
        for name, t in self.tables.items():
            bits = [f"+{len(t.added)}" if t.added else "", f"-{len(t.removed)}" if t.removed else "",
                    f"~{len(t.changed)}" if t.changed else ""]
            parts.append(f"{name} " + " ".join(b for b in bits if b))
        return ", ".join(parts) or "no change"


def _field_changes(before: Any, after: Any, path: str, out: list[FieldChange]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for k in list(before) + [k for k in after if k not in before]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in after:
                out.append(FieldChange(path=sub, before=before[k], after=None))
            elif k not in before:
                out.append(FieldChange(path=sub, before=None, after=after[k]))
            else:
                _field_changes(before[k], after[k], sub, out)
    elif not _same(before, after):
        out.append(FieldChange(path=path, before=before, after=after))


def _same(a: Any, b: Any) -> bool:
    """Equality that, like the state hash, tells 2 from 2.0 and True from 1, at any depth."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _same_raw(a: tuple, b: tuple) -> bool:
    """Raw SQLite rows: equal values of the same types (JSON columns are text here)."""
    return a == b and all(type(x) is type(y) for x, y in zip(a, b))


def diff_dumps(before: Dump, after: Dump) -> DbDiff:
    """Records added, removed, and changed (with each changed field's old and new value)."""
    result = DbDiff()
    for tname in list(before) + [t for t in after if t not in before]:
        old, new = before.get(tname, {}), after.get(tname, {})
        td = TableDiff(
            added={k: v for k, v in new.items() if k not in old},
            removed={k: v for k, v in old.items() if k not in new},
        )
        for key in old.keys() & new.keys():
            changes: list[FieldChange] = []
            _field_changes(old[key], new[key], "", changes)
            if changes:
                td.changed[key] = changes
        if td.added or td.removed or td.changed:
            td.changed = dict(sorted(td.changed.items()))
            result.tables[tname] = td
    return result


def _written_since(before: Database, after: Database, table: str) -> list | None:
    """The keys of ``table`` written in ``after`` when it was copied from ``before`` as ``before``
    is now (their version tokens for the table match); None when unknown or too many to list."""
    base, now = after.base_versions(), before.versions()
    if not base or not now or table not in now or base.get(table) != now[table]:
        return None
    return after.changed_keys(table)


def diff_databases(before: Database, after: Database) -> DbDiff:
    """``diff_dumps(before.dump(), after.dump())`` without decoding the rows that did not change
    (raw SQLite values are compared first): cheap for a large database with a few changes."""
    result = DbDiff()
    old_versions, new_versions = before.versions(), after.versions()
    for tname, table in before.schema.tables.items():
        if old_versions and new_versions and tname in old_versions \
                and old_versions.get(tname) == new_versions.get(tname):
            continue  # neither wrote to it since one was copied from the other
        pk = list(table.columns).index(table.primary_key)
        keys = _written_since(before, after, tname)  # ``after`` a copy of ``before`` with these written
        if keys == []:
            continue
        old = {row[pk]: row for row in before.raw_rows(tname, keys)}
        new = {row[pk]: row for row in after.raw_rows(tname, keys)}
        td = TableDiff()
        for key, row in new.items():
            if key not in old:
                k, record = after._decode(table, row)
                td.added[k] = record
            elif not _same_raw(old[key], row):
                k, was = before._decode(table, old[key])
                _, now = after._decode(table, row)
                changes: list[FieldChange] = []
                _field_changes(was, now, "", changes)
                if changes:
                    td.changed[k] = changes
        for key, row in old.items():
            if key not in new:
                k, record = before._decode(table, row)
                td.removed[k] = record
        if td.added or td.removed or td.changed:
            td.changed = dict(sorted(td.changed.items()))
            result.tables[tname] = td
    return result
