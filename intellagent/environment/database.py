"""A conversation's database: a real SQLite database built from an environment's schema and rows.

Tools read and write it through :class:`Database`; later stages take snapshots, diffs, content
hashes and plain-JSON dumps of it. The tables are made by SQLAlchemy from the YAML schema (types,
NOT NULL, enum CHECKs, primary and foreign keys); rows go through plain SQLite for speed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateTable

from intellagent import jsontext
from intellagent.environment.dbschema import Column, DatabaseSchema, Table, value_problem

Dump = dict[str, dict[str, dict[str, Any]]]
"""A whole database as plain JSON: table → key → record."""

_SA_TYPES = {
    "string": sa.Text, "date": sa.Text, "datetime": sa.Text, "integer": sa.Integer,
    "number": sa.Float, "boolean": sa.Boolean, "json": sa.Text,
}


class RowError(ValueError):
    """A row that does not fit the schema; the message names the table, key and column.

    ``missing_reference`` is the (table, key) a foreign key pointed at, when that is the fault.
    """

    def __init__(self, message: str, missing_reference: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.missing_reference = missing_reference


def sqlalchemy_metadata(schema: DatabaseSchema) -> sa.MetaData:
    """The schema as SQLAlchemy tables (also usable on any SQLAlchemy database)."""
    meta = sa.MetaData()
    for tname in schema.load_order():
        table = schema.tables[tname]
        items: list[Any] = []
        for cname, col in table.columns.items():
            args = [sa.ForeignKey(col.references)] if col.references else []
            items.append(sa.Column(cname, _SA_TYPES[col.type](), *args,
                                   primary_key=cname == table.primary_key,
                                   nullable=col.nullable and cname != table.primary_key,
                                   unique=col.unique and cname != table.primary_key))
            if col.enum is not None:
                items.append(sa.CheckConstraint(sa.column(cname).in_(col.enum),
                                                name=f"ck_{tname}_{cname}_enum"))
        sa.Table(tname, meta, *items)
    return meta


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_hashable(v) for v in value))
    return value


def state_hash(dump: Dump) -> str:
    """SHA-256 of a dump, independent of key order and sensitive to value types (5 ≠ 5.0).

    The same definition as τ-bench's data hash, so hashes compare across the two projects.
    """
    return hashlib.sha256(str(_hashable(dump)).encode("utf-8")).hexdigest()


def _tuple_text(parts: list[str]) -> str:
    """``str()`` of a tuple whose elements' ``str()`` are ``parts``."""
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


VERSIONS = "_intellagent_versions"
"""Our table of one version token per table, changed by triggers on every write to that table
(whatever path the write takes: a tool's raw SQL too). Two databases whose tokens for a table
are equal share that table's content: one is a copy of the other and neither wrote to it since.
Hashes and diffs skip what did not change."""

LISTED_KEYS = 500
"""Most changed keys a hash or a diff reads by key (well under SQLite's limit on parameters)."""

CHANGED = "_intellagent_changed"
"""The keys written (inserted, updated or deleted) per table since the database was made or
copied, by the same triggers: a hash or a diff against the copy's origin reads only those rows."""


def _track_versions(conn: sqlite3.Connection, schema: DatabaseSchema) -> None:
    """The version and changed-key tables and their triggers. They live beside the environment's
    tables (names starting ``_intellagent_``), so a copy, page for page, carries them with the
    original's tokens; TEMP ones had to be made anew per copy, 0.7 ms of a 0.9 ms copy."""
    tables = list(schema.tables)
    ident = tuple((t, schema.tables[t].primary_key) for t in tables)  # the triggers name both
    script = _VERSION_SCRIPTS.get(ident)
    if script is None:
        parts = [f"CREATE TABLE {VERSIONS} (name TEXT PRIMARY KEY, v INTEGER NOT NULL);",
                 f"CREATE TABLE {CHANGED} (name TEXT NOT NULL, k NOT NULL, PRIMARY KEY (name, k));"]
        for t in tables:
            quoted = "'" + t.replace("'", "''") + "'"
            pk = _q(schema.tables[t].primary_key)
            parts.append(f"INSERT INTO {VERSIONS} VALUES ({quoted}, random());")
            for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
                marks = " ".join(f"INSERT OR IGNORE INTO {CHANGED} VALUES ({quoted}, {r}.{pk});"
                                 for r in rows)
                parts.append(f"CREATE TRIGGER {_q(f'_intellagent_{event.lower()}_{t}')} AFTER {event} "
                             f"ON {_q(t)} BEGIN UPDATE {VERSIONS} SET v = random() "
                             f"WHERE name = {quoted}; {marks} END;")
        script = _VERSION_SCRIPTS[ident] = "BEGIN;\n" + "\n".join(parts) + "\nCOMMIT;"
    conn.executescript(script)  # one transaction: one journal pass for the whole set-up


_VERSION_SCRIPTS: dict[tuple[tuple[str, str], ...], str] = {}


def _clone(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    """Every table, row, index and trigger of ``source`` as its connection sees them (uncommitted
    writes included) into the empty ``target``; triggers last, so the copy fires none."""
    objects = source.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                             "AND name NOT LIKE 'sqlite_%'").fetchall()
    target.execute("BEGIN")
    for kind, name, sql in sorted(objects, key=lambda o: _CLONE_ORDER[o[0]]):  # stable: tables in order
        target.execute(sql)
        rows = source.execute(f"SELECT * FROM {_q(name)}").fetchall() if kind == "table" else []
        if rows:
            target.executemany(f"INSERT INTO {_q(name)} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    target.execute("COMMIT")


_CLONE_ORDER = {"table": 0, "index": 1, "view": 1, "trigger": 2}


def _connection_pragmas(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA foreign_keys = ON")
    # a row that INSERT OR REPLACE (or a UNIQUE clash under REPLACE) deletes fires the DELETE
    # trigger too, so the changed keys name it
    conn.execute("PRAGMA recursive_triggers = ON")


class _Decoder:
    """Raw SQLite rows of one table to (key, record), with the per-column work decided once."""

    def __init__(self, table_name: str, table: Table) -> None:
        names = list(table.columns)
        self.pk = names.index(table.primary_key)
        self.json = [i for i, c in enumerate(table.columns.values()) if c.type == "json"]
        self.bool = [i for i, c in enumerate(table.columns.values()) if c.type == "boolean"]
        drop_key = not table.key_in_record
        self.omit = {i for i, c in enumerate(table.columns.values()) if c.omit_if_null}
        self.keep = [(i, n) for i, n in enumerate(names) if not (drop_key and i == self.pk)]
        self.plain = not (self.json or self.bool or self.omit or drop_key)
        self.names = names
        self.columns = ", ".join(_q(c) for c in names)  # the SELECT list, quoted once
        self.by_key = f"SELECT {self.columns} FROM {_q(table_name)} WHERE {_q(table.primary_key)} = ?"
        self.exists = f"SELECT 1 FROM {_q(table_name)} WHERE {_q(table.primary_key)} = ?"

    def __call__(self, raw: tuple) -> tuple[str, dict[str, Any]]:
        if self.plain:
            return str(raw[self.pk]), dict(zip(self.names, raw))
        values = list(raw)
        for i in self.json:
            if values[i] is not None:
                values[i] = jsontext.loads(values[i])
        for i in self.bool:
            if values[i] is not None:
                values[i] = bool(values[i])
        omit = self.omit
        return str(values[self.pk]), {n: values[i] for i, n in self.keep
                                      if not (i in omit and values[i] is None)}


class Database:
    """An open database of one schema. Records are plain dicts shaped as in the dump."""

    def __init__(self, schema: DatabaseSchema, connection: sqlite3.Connection) -> None:
        self.schema = schema
        self.conn = connection
        self._depth = 0
        # a tool call runs in a thread of its own and may still be inside a transaction when its
        # dialog ends (cancelled, the run stopped): the connection is closed when it leaves
        self._state = threading.Lock()
        self._closing = False  # closed, or to close when the transaction open on it ends
        self._base: dict[str, int] | None = None  # the version tokens it was made or copied with
        # the schema's caches, held here: pydantic's look-up of a private attribute is ~3 µs,
        # and a tool call reads a few rows, each through the decoder
        self._decoders: dict[int, _Decoder] = schema._decoders  # id(table) → its decoder
        self._statements: dict[tuple[str, bool], str] = schema._statements
        self._row_json_text: dict[tuple, str] = schema._row_json_text
        self._keys: dict[str, list[str]] | None = None  # a frozen database's keys, per table

    # -- construction -------------------------------------------------------------------

    @classmethod
    def empty(cls, schema: DatabaseSchema) -> "Database":
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        _connection_pragmas(conn)
        dialect = sqlite_dialect.dialect()
        with warnings.catch_warnings():  # tables that refer to each other: any order creates them
            warnings.simplefilter("ignore", sa_exc.SAWarning)
            tables = sqlalchemy_metadata(schema).sorted_tables
        for table in tables:
            conn.execute(str(CreateTable(table).compile(dialect=dialect)))
        _track_versions(conn, schema)
        db = cls(schema, conn)
        db._base = db.versions()
        return db

    @classmethod
    def from_dump(cls, schema: DatabaseSchema, dump: Dump) -> "Database":
        """A database holding ``dump`` (rows are checked against the schema)."""
        db = cls.empty(schema)
        with db.transaction():
            for tname in schema.load_order():
                for key, record in dump.get(tname, {}).items():
                    db.insert(tname, record, key=key)
        return db

    def copy(self) -> "Database":
        """An independent copy of what the database holds now (SQLite's online backup: fast,
        page for page). Inside an open transaction (a tool's), the backup cannot read a database
        its own connection is writing to (it waited forever): the copy is then made statement by
        statement, the transaction's writes included."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        if self.conn.in_transaction:
            _clone(self.conn, conn)
        else:
            self.conn.backup(conn)
        _connection_pragmas(conn)
        versions = self.versions()
        if versions is not None:
            conn.execute(f"DELETE FROM {CHANGED}")  # a copy has written nothing yet
        db = Database(self.schema, conn)
        db._base = versions
        return db

    def take_versions(self, versions: dict[str, int] | None) -> None:
        """Make this database a copy, as :meth:`copy` makes one, of a database whose version
        tokens were ``versions`` and whose content this one has (it was made again the same way:
        the same seed and rows): hashes and diffs between the two then skip what neither wrote
        since. Other content under those tokens would hide its differences from them."""
        if versions is None or self.versions() is None:
            return
        self.conn.executemany(f"UPDATE {VERSIONS} SET v = ? WHERE name = ?",
                              [(v, name) for name, v in versions.items()])
        self.conn.execute(f"DELETE FROM {CHANGED}")
        self._base = dict(versions)

    def close(self) -> None:
        """Close the connection, or, while a transaction is open (a tool call in another thread),
        as soon as it ends: sqlite3 freed under a running statement crashes the process. Checked
        and closed under one lock, so no transaction begins in between (one that begins after
        meets sqlite3's error for a closed database, not a freed one)."""
        with self._state:
            self._closing = True
            if not self._depth:
                self.conn.close()

    def __del__(self) -> None:
        # sqlite3 keeps a connection in a reference cycle (its statement cache refers back to
        # it), so a connection dropped open waits for a full garbage collection, holding its
        # database's memory (0.7 MB for airline's seed) meanwhile: 130 of them at once, 90 MB, in
        # a 64-in-flight run over HTTP. A database is closed when it is dropped.
        conn = self.__dict__.get("conn")
        if conn is not None:
            conn.close()

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator["Database"]:
        """All writes inside commit together, or none does if an exception escapes."""
        with self._savepoint() as name:
            try:
                yield self
            except BaseException:
                self._roll_back(name)
                raise
            else:
                self.conn.execute(f"RELEASE {name}")

    @contextmanager
    def undone(self) -> Iterator["Database"]:
        """A block whose writes are all undone when it ends, however it ends: the database is
        then as it was before it (its rows, their order, its version tokens and changed keys).
        Closed inside the block, it has nothing to undo: it closes as the block ends (or as the
        transaction a tool call still has open on it ends). A block whose writes were committed
        by raw SQL inside it (``COMMIT`` ends every savepoint) cannot be undone: the database is
        closed instead."""
        base = self._base
        with self._savepoint() as name:
            try:
                yield self
            finally:
                if not self._closing:  # (closed inside: nothing to undo)
                    if self.conn.in_transaction:
                        self._roll_back(name)
                        self._base = base  # (a diff inside may have named other versions its base)
                    else:  # a COMMIT inside ended the savepoint
                        self.close()

    @property
    def closing(self) -> bool:
        """Whether :meth:`close` was called (the connection closed, or to close as soon as the
        transaction open on it ends)."""
        return self._closing

    @contextmanager
    def _savepoint(self) -> Iterator[str]:
        with self._state:
            name = f"sp{self._depth}"
            self._depth += 1
        try:
            self.conn.execute(f"SAVEPOINT {name}")
            yield name
        finally:
            with self._state:
                self._depth -= 1
                if not self._depth and self._closing:
                    self.conn.close()  # (again, for one closed already: sqlite3 does nothing)

    def _roll_back(self, name: str) -> None:
        self.conn.execute(f"ROLLBACK TO {name}")
        self.conn.execute(f"RELEASE {name}")

    # -- records ------------------------------------------------------------------------

    def _table(self, name: str) -> Table:
        try:
            return self.schema.tables[name]
        except KeyError:
            raise KeyError(f"no table '{name}' (tables: {', '.join(self.schema.tables)})") from None

    def _decoder(self, table: Table) -> "_Decoder":
        """The table's row decoder, made once per schema."""
        decode = self._decoders.get(id(table))
        if decode is None:
            name = next(n for n, t in self.schema.tables.items() if t is table)
            decode = self._decoders[id(table)] = _Decoder(name, table)
        return decode

    def _decode(self, table: Table, row: sqlite3.Row | tuple) -> tuple[str, dict[str, Any]]:
        return self._decoder(table)(row)

    def versions(self) -> dict[str, int] | None:
        """Each table's version token (see ``VERSIONS``); None for a database made elsewhere."""
        try:
            return dict(self.conn.execute(f"SELECT name, v FROM {VERSIONS}"))
        except sqlite3.OperationalError:
            return None

    def _select(self, tname: str, where: str = "", params: tuple = ()) -> list[tuple[str, dict]]:
        table = self._table(tname)
        decode = self._decoder(table)
        cur = self.conn.execute(f"SELECT {decode.columns} FROM {_q(tname)} {where} ORDER BY rowid", params)
        return [decode(row) for row in cur.fetchall()]

    def get(self, table: str, key: Any) -> dict[str, Any] | None:
        """The record with primary key ``key``, or None."""
        decode = self._decoder(self._table(table))
        raw = self.conn.execute(decode.by_key, (key,)).fetchone()
        return None if raw is None else decode(raw)[1]

    def raw_rows(self, table: str, keys: list[Any] | None = None) -> Iterable[tuple]:
        """The rows of ``table`` as SQLite holds them (the decoder's columns, unordered): all of
        them, or those whose primary key is among ``keys``."""
        t = self._table(table)
        select = f"SELECT {self._decoder(t).columns} FROM {_q(table)}"
        if keys is None:
            return self.conn.execute(select)
        if not keys:
            return ()
        return self.conn.execute(f"{select} WHERE {_q(t.primary_key)} IN ({', '.join('?' * len(keys))})",
                                 keys)

    def record_json(self, table: str, key: Any, *, keep: bool = True) -> str | None:
        """``json.dumps(self.get(table, key), default=str, ensure_ascii=False)``, remembered per
        row content: rows shown to a model again and again (seed rows) are decoded once.
        ``keep=False``: a row's text is not remembered, only read if it was (a row written for
        one event: 4,096 of them held 11 MiB more at 1,600 events)."""
        t = self._table(table)
        raw = next(iter(self.raw_rows(table, [key])), None)
        if raw is None:
            return None
        cache = self._row_json_text
        text = cache.get((table, raw))
        if text is None:
            text = json.dumps(self._decode(t, raw)[1], default=str, ensure_ascii=False)
            if keep:
                _keep_recent(cache, ROWS_KEPT)
                cache[(table, raw)] = text
        return text

    def has(self, table: str, key: Any) -> bool:
        return self.conn.execute(self._decoder(self._table(table)).exists, (key,)).fetchone() is not None

    def items(self, table: str) -> list[tuple[str, dict[str, Any]]]:
        """Every (key, record) of ``table``, in insertion order."""
        return self._select(table)

    def all(self, table: str) -> list[dict[str, Any]]:
        return [r for _, r in self._select(table)]

    def values(self, table: str, column: str) -> list[Any]:
        """One column of every record, in insertion order (decodes only that column: cheaper
        than ``all`` for a check over a large table)."""
        col = self._table(table).columns.get(column)
        if col is None:
            raise KeyError(f"no column '{column}' in table '{table}'")
        return [_from_sql(col, r[0]) for r in self.conn.execute(
            f"SELECT {_q(column)} FROM {_q(table)} ORDER BY rowid")]

    def keys(self, table: str, limit: int | None = None) -> list[str]:
        """The table's keys in insertion order (the first ``limit`` of them)."""
        if self._keys is not None:  # frozen: read once
            keys = self._keys.get(table)
            if keys is None:
                keys = self._keys[table] = self._read_keys(table, None)
            return keys[:limit]  # a copy (a slice): the caller may change it
        return self._read_keys(table, limit)

    def _read_keys(self, table: str, limit: int | None) -> list[str]:
        pk = self._table(table).primary_key
        return [str(r[0]) for r in self.conn.execute(
            f"SELECT {_q(pk)} FROM {_q(table)} ORDER BY rowid LIMIT ?", (-1 if limit is None else limit,))]

    def freeze(self) -> None:
        """Refuse every write from now on (SQLite's query_only) and read each table's keys once:
        the seed that every event reads its candidates from and copies."""
        self.conn.execute("PRAGMA query_only = ON")
        self._keys = {}

    def count(self, table: str) -> int:
        return self.conn.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()[0]

    def select(self, table: str, **equals: Any) -> list[dict[str, Any]]:
        """Records whose (non-JSON) columns equal the given values, in insertion order."""
        t = self._table(table)
        for c in equals:
            if c not in t.columns:
                raise KeyError(f"table '{table}' has no column '{c}'")
        where = " AND ".join(f"{_q(c)} = ?" for c in equals)
        params = tuple(_to_sql(t.columns[c], v) for c, v in equals.items())
        return [r for _, r in self._select(table, f"WHERE {where}" if where else "", params)]

    def _row(self, tname: str, record: dict[str, Any], key: Any) -> tuple[Table, dict[str, Any]]:
        table = self._table(tname)
        row = dict(record)
        if key is not None:
            if table.key_in_record and table.primary_key in row and row[table.primary_key] != key:
                raise RowError(f"{tname}[{key!r}]: key differs from its "
                               f"{table.primary_key} {row[table.primary_key]!r}")
            row[table.primary_key] = key
        problems = row_problems(table, row)
        if problems:
            label = row.get(table.primary_key, "?")
            raise RowError(f"{tname}[{label!r}]: " + "; ".join(problems))
        return table, row

    def insert(self, table: str, record: dict[str, Any], *, key: Any = None) -> None:
        """Add a record; ``key`` is needed when the table keeps its key out of the record."""
        t, row = self._row(table, record, key)
        self._write(table, t, row, None)

    def put(self, table: str, key: Any, record: dict[str, Any]) -> None:
        """Replace the record at ``key`` (keeping its place in insertion order), or add it."""
        t, row = self._row(table, record, key)
        self._write(table, t, row, key if self.has(table, key) else None)

    def _write(self, tname: str, table: Table, row: dict[str, Any], key: Any) -> None:
        """Insert a checked row, or update the one at ``key`` with it."""
        self._check_references(tname, table, row)
        statements = self._statements
        sql = statements.get((tname, key is None))
        if sql is None:
            if key is None:
                sql = (f"INSERT INTO {_q(tname)} ({', '.join(_q(c) for c in table.columns)}) "
                       f"VALUES ({', '.join('?' for _ in table.columns)})")
            else:
                sets = ", ".join(f"{_q(c)} = ?" for c in table.columns if c != table.primary_key)
                sql = f"UPDATE {_q(tname)} SET {sets} WHERE {_q(table.primary_key)} = ?"
            statements[(tname, key is None)] = sql
        values = tuple(_to_sql(col, row.get(c)) for c, col in table.columns.items()
                       if key is None or c != table.primary_key)
        try:
            self.conn.execute(sql, values if key is None else values + (key,))
        except sqlite3.IntegrityError as exc:
            label = row[table.primary_key] if key is None else key
            raise RowError(f"{tname}[{label!r}]: {_integrity_message(exc, table)}") from None

    def update(self, table: str, key: Any, **changes: Any) -> dict[str, Any]:
        """Change some fields of a record; returns the new record."""
        record = self.get(table, key)
        if record is None:
            raise KeyError(f"{table}[{key!r}] does not exist")
        record.update(changes)
        self.put(table, key, record)
        return record

    def _check_references(self, tname: str, table: Table, row: dict[str, Any]) -> None:
        for cname, col in table.columns.items():
            value = row.get(cname)
            if col.references and value is not None:
                rt = col.references.split(".")[0]
                if not self.has(rt, value):
                    raise RowError(f"{tname}[{row[table.primary_key]!r}]: column '{cname}' refers "
                                   f"to {rt}[{value!r}], which does not exist", (rt, str(value)))

    def delete(self, table: str, key: Any) -> None:
        pk = self._table(table).primary_key
        self.conn.execute(f"DELETE FROM {_q(table)} WHERE {_q(pk)} = ?", (key,))

    def execute(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        """Raw SQL for queries the record methods do not cover (JSON columns hold JSON text)."""
        return self.conn.execute(sql, params).fetchall()

    # -- whole-state views --------------------------------------------------------------

    def dump(self) -> Dump:
        """The whole database as plain JSON, table → key → record."""
        return {t: dict(self._select(t)) for t in self.schema.tables}

    def changed_keys(self, table: str) -> list[Any] | None:
        """The primary keys written in ``table`` (inserted, updated or deleted) since this database
        was made or copied; None for a database made elsewhere, or when more than
        ``LISTED_KEYS`` were written (reading the table whole is then as cheap)."""
        if self._base is None:
            return None
        keys = [r[0] for r in self.conn.execute(f"SELECT k FROM {CHANGED} WHERE name = ? LIMIT ?",
                                                (table, LISTED_KEYS + 1))]
        return keys if len(keys) <= LISTED_KEYS else None

    def size(self) -> int:
        """The bytes of the database's pages."""
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        return pages * self.conn.execute("PRAGMA page_size").fetchone()[0]

    def base_versions(self) -> dict[str, int] | None:
        """The version tokens this database was made or copied with (see ``VERSIONS``)."""
        return self._base

    def hash(self) -> str:
        """``state_hash(self.dump())``, computed table by table and row by row from caches.

        A table whose version was hashed before is reused as it is; a table written since this
        database was copied from a hashed one is that table's rows with only the changed keys
        read again; any other table is read whole. Rows already seen (every conversation's
        database shares most rows with the seed) are not decoded again. The digest is fed table
        by table, and resumes after the longest run of first tables hashed before at the same
        versions (a conversation rarely writes to the first tables: flights before reservations)."""
        versions = self.versions() or {}
        prefixes = self.schema._hash_prefixes
        steps = [(tname, versions.get(tname)) for tname in sorted(self.schema.tables)]
        # only the first tables up to one of no version can be named by their versions
        named = next((i for i, (_, version) in enumerate(steps) if version is None), len(steps))
        done, digest = 0, None
        for i in range(named, 0, -1):
            digest = prefixes.get(tuple(steps[:i]))
            if digest is not None:
                done, digest = i, digest.copy()
                break
        if digest is None:
            digest = hashlib.sha256(b"(")
        for i in range(done, len(steps)):
            tname, version = steps[i]
            known = _lru_get(self.schema._table_hash_text, (tname, version)) if version is not None else None
            if known is None:
                entries = self._row_texts(tname)
                known = (entries, f"({tname!r}, {_tuple_text([entries[k] for k in sorted(entries)])})")
                if version is not None:
                    _lru_put(self.schema._table_hash_text, (tname, version), known)
            digest.update((", " + known[1] if i else known[1]).encode("utf-8"))
            if i < named:
                _keep_recent(prefixes, HASH_PREFIXES)
                prefixes[tuple(steps[:i + 1])] = digest.copy()
        digest.update(b",)" if len(steps) == 1 else b")")  # str() of a tuple of one has its comma
        return digest.hexdigest()

    def _row_texts(self, tname: str) -> dict[str, str]:
        """Key → the row's text in the state hash, for every row of ``tname``."""
        table = self.schema.tables[tname]
        base = (self._base or {}).get(tname)
        origin = _lru_get(self.schema._table_hash_text, (tname, base)) if base is not None else None
        changed = self.changed_keys(tname) if origin is not None else None
        if changed is not None:
            entries = dict(origin[0])
            pk = table.columns[table.primary_key]
            for key in changed:
                entries.pop(str(_from_sql(pk, key)), None)  # keyed as the decoder keys a row
        else:
            entries = {}
        rows = self.raw_rows(tname, changed)
        cache = self.schema._row_hash_text  # raw SQLite values → (key, text)
        _keep_recent(cache, ROWS_KEPT)
        for raw in rows:
            entry = cache.get((tname, raw))
            if entry is None:
                key, record = self._decode(table, raw)
                entry = cache[(tname, raw)] = (key, f"({key!r}, {_hashable(record)})")
            entries[entry[0]] = entry[1]
        return entries


def _lru_get(cache: dict, key: Any) -> Any:
    value = cache.pop(key, None)
    if value is not None:
        cache[key] = value  # most recently used last
    return value


ROWS_KEPT = 4096
"""Rows whose decoded text a schema keeps (per cache: state-hash texts, JSON texts). A row is
read again soon or not at all: the seed's rows while a run starts, an event's new rows when its
conversation's database is hashed. Under a bound of 50,000 the hash texts grew by 1.7 airline
rows an event (3.5 KB each, 18 MB at 3,000 events) of rows no database held any more."""


def _keep_recent(cache: dict, bound: int) -> None:
    """At ``bound`` entries, drop the oldest quarter (insertion order), so an entry added next
    keeps the cache within it. The seed is built and hashed on a thread of its own: should it
    be filling the cache meanwhile, this trim waits for the next call."""
    if len(cache) >= bound:
        try:
            oldest = list(itertools.islice(cache, max(1, bound // 4)))
        except RuntimeError:  # changed size during iteration
            return
        for key in oldest:
            cache.pop(key, None)


HASH_TEXTS = (16, 50_000_000)
"""Tables' hash texts kept (each with its rows'): at most this many, of at most this many
characters in all (a few copies of a large table; the seed's, used by every copy, stay). Most
are of databases hashed once (an event's, a conversation's): 64 held 25 MB on airline."""


HASH_PREFIXES = 256
"""Digests after the first tables kept (each a few hundred bytes), the oldest dropped first."""


def _lru_put(cache: dict, key: Any, value: tuple[dict[str, str], str]) -> None:
    cache[key] = value
    count, chars = HASH_TEXTS
    while len(cache) > 1 and (len(cache) > count or sum(len(v[1]) for v in cache.values()) > chars):
        del cache[next(iter(cache))]


def row_problems(table: Table, row: dict[str, Any]) -> list[str]:
    problems = [f"unknown column '{c}'" for c in row if c not in table.columns]
    for cname, col in table.columns.items():
        if cname not in row and not col.nullable:
            problems.append(f"column '{cname}' is missing")
            continue
        problem = value_problem(col, row.get(cname))
        if problem:
            problems.append(f"column '{cname}' {problem}")
    return problems


def _to_sql(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if col.type == "json":
        return jsontext.dumps(value)
    if col.type == "boolean":
        return int(value)
    return value


def _from_sql(col: Column, raw: Any) -> Any:
    if raw is None:
        return None
    if col.type == "json":
        return jsontext.loads(raw)
    if col.type == "boolean":
        return bool(raw)
    return raw


def _integrity_message(exc: sqlite3.IntegrityError, table: Table) -> str:
    text = str(exc)
    if "UNIQUE" in text or "PRIMARY KEY" in text:
        column = text.rsplit(".", 1)[-1].strip()
        if column == table.primary_key or "PRIMARY KEY" in text:
            return "duplicate primary key"
        return f"column '{column}' must be unique, and another row has this value"
    if "FOREIGN KEY" in text:
        return "refers to a row that does not exist (foreign key)"
    return text
