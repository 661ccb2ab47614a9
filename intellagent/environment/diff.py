"""What changed between two database states, field by field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from intellagent.environment.database import Dump


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
    elif type(before) is not type(after) or before != after:
        out.append(FieldChange(path=path, before=before, after=after))


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
