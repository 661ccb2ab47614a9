"""The hard check of an event: the expected end state (what the generator says a correct agent
leaves in the database) against the dialog's row-level database diff."""

from __future__ import annotations

from typing import Any

from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.intellagent.artefacts import Event, Expectation, ExpectationResult, StateCheck


def _get(record: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        if not isinstance(record, dict) or part not in record:
            return _MISSING
        record = record[part]
    return record


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) < 1e-9
    return a == b


def _touches(change_path: str, field: str) -> bool:
    return change_path == field or change_path.startswith(field + ".") or field.startswith(change_path + ".")


def check_state(event: Event, dialog: Dialog, initial: Any) -> StateCheck:
    """``initial`` is the event's initial database (for the values of fields the dialog left)."""
    if not event.end_state:
        return StateCheck(status="none")
    tables = (dialog.db_diff or {}).get("tables", {})
    results = [ExpectationResult(expectation=e.describe(), **_one(e, tables, initial))
               for e in event.end_state]
    return StateCheck(status="pass" if all(r.ok for r in results) else "fail", results=results)


def _one(e: Expectation, tables: dict, initial: Any) -> dict[str, Any]:
    diff = tables.get(e.table, {})
    changes = diff.get("changed", {}).get(e.key, [])
    if e.kind == "row-added":
        wanted = e.value or {}
        for key, record in diff.get("added", {}).items():
            if all(_same(_get(record, f), v) for f, v in wanted.items()):
                return {"ok": True, "detail": f"added {e.table}[{key}]"}
        added = list(diff.get("added", {}))
        return {"ok": False, "detail": f"no such row added (added: {', '.join(added) or 'none'})"}
    if e.kind == "row-removed":
        ok = e.key in diff.get("removed", {})
        return {"ok": ok, "detail": "" if ok else "the row is still there"}
    if e.kind == "row-unchanged":
        ok = not changes and e.key not in diff.get("removed", {})
        return {"ok": ok, "detail": "" if ok else "changed: " + ", ".join(c["path"] for c in changes)}
    touched = [c for c in changes if _touches(c["path"], e.field)]
    if e.kind == "field-changes":
        return {"ok": bool(touched), "detail": "" if touched else f"{e.field} did not change"}
    # field-equals: the final value is the initial one with the dialog's changes applied
    record = initial.get(e.table, e.key) if initial is not None else None
    if e.key in diff.get("removed", {}):
        return {"ok": False, "detail": "the row was removed"}
    for c in touched:
        if c["path"] == e.field:
            value = c["after"]
            break
        if e.field.startswith(c["path"] + "."):
            value = _get(c["after"], e.field[len(c["path"]) + 1:])
            break
    else:
        value = _get(record, e.field)
    if value is _MISSING:
        return {"ok": False, "detail": f"{e.field} is not set"}
    ok = _same(value, e.value)
    return {"ok": ok, "detail": "" if ok else f"{e.field} is {value!r}"}
