"""The database schema of an environment, as written in its YAML (tables, typed columns, keys)."""

from __future__ import annotations

import math
from typing import Any, Callable, Literal

from pydantic import Field, PrivateAttr, model_validator

from intellagent.model import StrictModel

ColumnType = Literal["string", "integer", "number", "boolean", "json", "date", "datetime"]


class Column(StrictModel):
    """One column. ``json`` holds any nested value (objects, lists) exactly as given."""

    type: ColumnType
    description: str = ""
    nullable: bool = False
    enum: list[str | int] | None = Field(default=None, min_length=1, description="The only values "
                                         "allowed.")
    references: str | None = Field(default=None, description="Foreign key, as 'table.column'.")
    omit_if_null: bool = Field(
        default=False,
        description="Leave the key out of a record (and its dump) when the value is null, for "
                    "fields that only some records have.")
    unique: bool = Field(default=False, description="No two rows share this value (an email); a "
                         "row copied as a new one gets a fresh value of the same shape.")
    lists: str | None = Field(
        default=None, description="For a json list of keys: 'table.column' of the rows it lists, "
                                  "whose column refers back to this row (users.reservations lists "
                                  "reservations.user_id). Kept in step when rows are generated.")

    @model_validator(mode="after")
    def _check(self) -> "Column":
        if self.omit_if_null and not self.nullable:
            raise ValueError("omit_if_null needs nullable: true")
        for name in ("references", "lists"):
            value = getattr(self, name)
            if value is not None and value.count(".") != 1:
                raise ValueError(f"{name} must be 'table.column', got '{value}'")
        if self.lists is not None and self.type != "json":
            raise ValueError("lists: needs type: json (a list of keys)")
        return self


class Table(StrictModel):
    description: str = ""
    primary_key: str
    key_in_record: bool = Field(
        default=True,
        description="False when the key is only the record's name in a keyed dump (as in "
                    "{'user_1': {...}}) and not a field of the record itself.")
    columns: dict[str, Column]

    @model_validator(mode="after")
    def _check(self) -> "Table":
        if self.primary_key not in self.columns:
            raise ValueError(f"primary_key '{self.primary_key}' is not a column")
        if self.columns[self.primary_key].nullable:
            raise ValueError(f"primary_key '{self.primary_key}' cannot be nullable")
        return self

    @property
    def record_columns(self) -> list[str]:
        return [c for c in self.columns if self.key_in_record or c != self.primary_key]


class DatabaseSchema(StrictModel):
    """``tables`` in dependency order is not required: foreign keys decide the load order."""

    description: str = ""
    tables: dict[str, Table] = Field(min_length=1, description="The tables, by name (at least one).")
    _row_hash_text: dict[tuple, tuple[str, str]] = PrivateAttr(default_factory=dict)
    # (table, version) → (key → row text, table text), least recently used first
    _table_hash_text: dict[tuple, tuple[dict[str, str], str]] = PrivateAttr(default_factory=dict)
    # ((table, version), ...) of the first tables in name order → the state hash's SHA-256 after them
    _hash_prefixes: dict[tuple, Any] = PrivateAttr(default_factory=dict)
    _decoders: dict[int, Any] = PrivateAttr(default_factory=dict)  # id(table) → row decoder
    _statements: dict[tuple[str, bool], str] = PrivateAttr(default_factory=dict)  # (table, insert?) → SQL
    _row_json_text: dict[tuple, str] = PrivateAttr(default_factory=dict)  # (table, raw row) → JSON

    @model_validator(mode="after")
    def _check_references(self) -> "DatabaseSchema":
        for tname, table in self.tables.items():
            for cname, col in table.columns.items():
                if col.lists is not None:
                    lt, lc = col.lists.split(".")
                    target = self.tables.get(lt)
                    if target is None or lc not in target.columns:
                        raise ValueError(f"{tname}.{cname} lists '{col.lists}', which is not a column")
                    if target.columns[lc].references != f"{tname}.{table.primary_key}":
                        raise ValueError(f"{tname}.{cname} lists '{col.lists}', which must reference "
                                         f"{tname}.{table.primary_key}")
                if col.references is None:
                    continue
                rt, rc = col.references.split(".")
                if rt not in self.tables:
                    raise ValueError(f"{tname}.{cname} references unknown table '{rt}'")
                if rc != self.tables[rt].primary_key:
                    raise ValueError(f"{tname}.{cname} must reference the primary key of '{rt}' "
                                     f"('{self.tables[rt].primary_key}'), not '{rc}'")
        return self

    def load_order(self) -> list[str]:
        """Tables ordered so that every referenced table comes before the tables citing it."""
        order: list[str] = []
        for name in self.tables:
            self._visit(name, order, set())
        return order

    def _visit(self, name: str, order: list[str], visiting: set[str]) -> None:
        """Append ``name`` to ``order`` after the tables it references (a method, not a nested
        function: a closure calling itself is a reference cycle, garbage the collector must find)."""
        if name in order or name in visiting:
            return
        visiting.add(name)
        for col in self.tables[name].columns.values():
            if col.references:
                self._visit(col.references.split(".")[0], order, visiting)
        visiting.discard(name)
        order.append(name)


_FITS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "date": lambda v: isinstance(v, str),
    "datetime": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "json": lambda v: True,
}
"""Whether a value (not None) is of a column type's Python type."""


def value_problem(column: Column, value: Any) -> str | None:
    """Why ``value`` does not fit ``column``, or None when it does."""
    if value is None:
        return None if column.nullable else "is required (null given)"
    kind = column.type
    if not _FITS[kind](value):
        return f"expected {kind}, got {type(value).__name__} {value!r}"
    if kind == "integer" and not -2**63 <= value < 2**63:
        return f"{value} is out of range (integers are 64-bit)"
    if kind == "number" and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if kind in ("date", "datetime"):
        from datetime import date, datetime

        try:
            (date if kind == "date" else datetime).fromisoformat(value)
        except ValueError:
            return f"expected an ISO {kind}, got {value!r}"
    if column.enum is not None and value not in column.enum:
        return f"{value!r} is not one of {column.enum}"
    return None
