"""Data validators an environment writes in Python: per row, and over the whole database.

A validator raises :class:`~intellagent.errors.ValidationFailed` (or ``ValueError``) with a
message a model can act on; the generator shows it to the model that made the rows.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from intellagent.environment.database import Database
from intellagent.errors import ValidationFailed

_MARK = "__intellagent_validator__"


def row_validator(table: str) -> Callable[[Callable], Callable]:
    """Mark ``fn(record, db)`` as a validator of each row of ``table``."""
    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, ("row", table))
        return fn
    return mark


def database_validator(fn: Callable) -> Callable:
    """Mark ``fn(db)`` as a validator of the whole database."""
    setattr(fn, _MARK, ("database", None))
    return fn


@dataclass
class Validator:
    kind: str  # "row" | "database"
    table: str | None
    func: Callable[..., Any]

    @property
    def name(self) -> str:
        return getattr(self.func, "__qualname__", repr(self.func))


def collect_validators(module: ModuleType) -> list[Validator]:
    out = []
    for value in vars(module).values():
        mark = getattr(value, _MARK, None)
        if mark and callable(value):
            out.append(Validator(mark[0], mark[1], value))
    return out


def signature_problem(validator: Validator) -> str | None:
    """Why ``validator`` cannot be called as its kind is (``fn(record, db)`` for a row,
    ``fn(db)`` for the database), or None."""
    wanted = ("record", "db") if validator.kind == "row" else ("db",)
    try:
        inspect.signature(validator.func).bind(*wanted)
    except TypeError:
        return f"validator {validator.name} must take ({', '.join(wanted)})"
    except ValueError:  # a builtin without a signature: let it run
        return None
    if inspect.iscoroutinefunction(validator.func):
        return f"validator {validator.name} is async (async def): validators run synchronously"
    return None


def run_validator(validator: Validator, *args: Any) -> str | None:
    """The validator's complaint, or None: what it raises (ValidationFailed, ValueError, an
    assertion) or returns (a message, or a list of them). A validator that crashes is reported
    as such."""
    try:
        said = validator.func(*args)
    except (ValidationFailed, ValueError, AssertionError) as exc:
        return str(exc) or type(exc).__name__
    except Exception as exc:
        return f"validator {validator.name} crashed: {type(exc).__name__}: {exc}"
    if isinstance(said, str) and said:
        return said
    if isinstance(said, (list, tuple)) and said and all(isinstance(s, str) for s in said):
        return "; ".join(said)
    return None


def validate_database(db: Database, validators: list[Validator], *, limit: int = 50,
                      rows: list[tuple[str, str, dict[str, Any]]] | None = None) -> list[str]:
    """Every complaint of every validator over every row (or only ``rows``, as (table, key,
    record) triples the caller has read: they are not decoded again), then the whole-database
    ones."""
    problems: list[str] = []
    for v in validators:
        if v.kind != "row":
            continue
        if v.table not in db.schema.tables:
            continue  # the loader reports it
        records = (db.items(v.table) if rows is None
                   else [(key, record) for table, key, record in rows if table == v.table])
        for key, record in records:
            complaint = run_validator(v, record, db)
            if complaint:
                problems.append(f"{v.table}[{key!r}]: {complaint}")
                if len(problems) >= limit:
                    return problems
    for v in validators:
        if v.kind == "database":
            complaint = run_validator(v, db)
            if complaint:
                problems.append(f"database: {complaint}")
    return problems
