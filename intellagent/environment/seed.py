"""Reading seed rows from JSON (keyed object or list), JSON Lines, CSV, each optionally gzipped."""

from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any

from intellagent.bounds import MAX_SEED_BYTES
from intellagent.environment.dbschema import Column, Table, value_problem
from intellagent.errors import EnvironmentError_
from intellagent.yamlio import json_lines, json_number_fault

SEED_SUFFIXES = (".json", ".jsonl", ".csv")


def seed_table(path: Path) -> str | None:
    """The table a file named like a seed file is for (``users.json.gz`` → ``users``), else None."""
    name = path.name.removesuffix(".gz")
    for suffix in SEED_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name.removesuffix(suffix)
    return None


def find_seed_file(folder: Path, table: str) -> Path | None:
    """The one seed file of ``table`` in ``folder`` (None if there is none; two are refused:
    which rows count would otherwise depend on the order we look)."""
    found = [candidate for suffix in SEED_SUFFIXES
             for candidate in (folder / f"{table}{suffix}", folder / f"{table}{suffix}.gz")
             if candidate.is_file()]
    if len(found) > 1:
        raise EnvironmentError_(f"two seed files for table '{table}': {found[0].name} and "
                                f"{found[1].name} (keep one)", file=folder)
    return found[0] if found else None


def _read_text(path: Path) -> str:
    """The seed file's text, decompressed once past :data:`MAX_SEED_BYTES` (a small .gz may
    hold a gigabyte) is refused."""
    try:
        with (gzip.open(path) if path.suffix == ".gz" else path.open("rb")) as fh:
            raw = fh.read(MAX_SEED_BYTES + 1)
        if len(raw) > MAX_SEED_BYTES:
            raise EnvironmentError_(f"seed file holds more than {MAX_SEED_BYTES:,} bytes"
                                    f"{' once decompressed' if path.suffix == '.gz' else ''}, past "
                                    "the bound", file=path)
        return raw.decode("utf-8")
    except FileNotFoundError:
        raise EnvironmentError_("seed file not found", file=path) from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:  # (a cut or corrupt .gz)
        raise EnvironmentError_(f"cannot read seed file: {exc}", file=path) from None


def read_seed(path: Path, table_name: str, table: Table) -> list[tuple[str, dict[str, Any], str]]:
    """(key, record, where) for every row of ``path``; ``where`` names the line or item."""
    kind = path.name.removesuffix(".gz").rsplit(".", 1)[-1]
    text = _read_text(path)
    pk = table.primary_key
    rows: list[tuple[str, dict[str, Any], str]] = []

    def add(record: Any, where: str, key: Any = None) -> None:
        if not isinstance(record, dict):
            raise EnvironmentError_(f"{table_name} row is not an object", file=path, item=where)
        if key is None:
            if pk not in record:
                raise EnvironmentError_(f"{table_name} row has no '{pk}'", file=path, item=where)
            key = record[pk]
            column = table.columns.get(pk)
            problem = "is null" if key is None else value_problem(column, key) if column else None
            if problem:  # (str(key) below made a null key the text 'None', an integer key text)
                raise EnvironmentError_(f"{table_name} row's primary key '{pk}' {problem}", file=path,
                                        item=where)
            if not table.key_in_record:
                record = {k: v for k, v in record.items() if k != pk}
        rows.append((str(key), record, where))

    if kind == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EnvironmentError_(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
        except RecursionError:
            raise EnvironmentError_("invalid JSON: nested too deeply", file=path) from None
        except ValueError as exc:  # an integer past Python's digit limit
            fault = json_number_fault(text)
            raise EnvironmentError_(f"invalid JSON: {fault[0] if fault else exc}", file=path,
                                    line=fault[1] if fault else None) from None
        if isinstance(data, dict):
            for key, record in data.items():
                add(record, f"{table_name}[{key!r}]", key)
        elif isinstance(data, list):
            for i, record in enumerate(data):
                add(record, f"item {i}")
        else:
            raise EnvironmentError_("expected a JSON object (keyed rows) or a list of rows", file=path)
    elif kind == "jsonl":
        for n, record in json_lines(text, path, error=EnvironmentError_, what="invalid JSON"):
            add(record, f"line {n}")
    elif kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        for n, raw in enumerate(reader, 2):
            if None in raw:  # DictReader keeps the fields past the header under None
                raise EnvironmentError_(f"{len(raw[None])} more field(s) than the header names", file=path,
                                        line=n)
            try:
                record = {k: _from_csv(table.columns[k], v) for k, v in raw.items() if k in table.columns}
            except ValueError as exc:
                raise EnvironmentError_(str(exc), file=path, line=n) from None
            unknown = [k for k in raw if k not in table.columns]
            if unknown:
                raise EnvironmentError_(f"unknown column '{unknown[0]}'", file=path, line=1)
            add(record, f"line {n}")
    else:
        raise EnvironmentError_(f"unsupported seed format '{kind}' (use json, jsonl or csv)", file=path)
    return rows


def _from_csv(col: Column, text: str | None) -> Any:
    if text is None or (text == "" and col.nullable):
        return None
    try:
        if col.type == "integer":
            return int(text)
        if col.type == "number":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if col.type == "boolean":
            lowered = text.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        if col.type == "json":
            return json.loads(text)
    except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{text!r} is not a valid {col.type}") from None
    return text
