"""How the store talks to its database: the URL, SQLite's settings, the one DBAPI connection
kept for the statements run per model call and per item, and the store's write lock."""

from __future__ import annotations

import contextlib
import operator
import os
import sqlite3
import time
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from sqlmodel import SQLModel

PG_WRITE_LOCK = "SELECT pg_advisory_xact_lock(4242)"  # the store's one write lock on PostgreSQL


def url_password(url: str) -> str | None:
    try:
        return sa.engine.make_url(url).password
    except Exception:
        return None


#: The databases a store may be on (SQLAlchemy backend names).
BACKENDS = ("sqlite", "postgresql")


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a store's URL (it is no URL, or names a database IntellAgent does
    not keep a store on), or None."""
    try:
        backend = sa.engine.make_url(url).get_backend_name()
    except Exception:
        return "not a store URL (expected sqlite:///FILE or postgresql://USER@HOST/DATABASE)"
    if backend not in BACKENDS:
        return (f"a store is on SQLite or PostgreSQL, not {backend} (expected sqlite:///FILE or "
                "postgresql://USER@HOST/DATABASE)")
    return None


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean the psycopg (3) driver, the one
    ``intellagent[postgres]`` installs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def safe_url(url: str) -> str:
    """The URL as it may be printed (without a password)."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "store"



BUSY_SECONDS = 30  # how long a connection waits for another's lock on a SQLite store
SQLITE_BUSY = 5


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we say BEGIN ourselves (SQLAlchemy's pysqlite recipe)
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
    to_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def to_wal(cur: Any) -> None:
    """Put the database in WAL mode. Two processes making a new store at once (two runs started
    together on a new workspace) both switch it; SQLite answers the switch that meets the other's
    with "database is locked" at once, without its busy timeout: it is tried again, for as long
    as that timeout. (A store already in WAL mode switches nothing: this is one statement.)"""
    deadline = time.monotonic() + BUSY_SECONDS
    pause = 0.001
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == SQLITE_BUSY  # BUSY or an extended BUSY_*
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def sqlite_read_pragmas(dbapi_conn: Any, _record: Any) -> None:
    """A read-only connection's settings: it waits for writers, and changes nothing (not even
    the journal mode: the folder may not be ours to write)."""
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
    cur.execute("PRAGMA query_only=ON")
    cur.close()


def sqlite_begin(conn: sa.Connection) -> None:
    # IMMEDIATE: take the write lock when the transaction starts, so two processes never both
    # read "not there yet" and then both write (migrations, claims)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN")



_PID = os.getpid()
"""This process's id, kept up to date in a forked child (``os.getpid`` is a system call, and the
kept connection checks it on every statement)."""


def _forked() -> None:
    global _PID
    _PID = os.getpid()


if hasattr(os, "register_at_fork"):  # (not on Windows, which does not fork)
    os.register_at_fork(after_in_child=_forked)


def _getter(keys: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple]:
    """The values of ``keys`` in a dict, as a tuple (one itemgetter: a call row's 20 values
    without a loop; an itemgetter of one key gives the value alone)."""
    if len(keys) > 1:
        return operator.itemgetter(*keys)
    return lambda params: tuple(params[k] for k in keys)


class HotConnection:
    """The statements run per model call and per item, compiled once for the store's dialect
    and executed on one DBAPI connection kept open: SQLAlchemy's per-statement machinery costs
    more CPU than SQLite itself (about 0.3 ms against 0.05 ms for a committed insert)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self._fairy: Any = None
        self._pid = 0
        self._compiled: dict[tuple, tuple[str, tuple[str, ...] | None]] = {}
        self._getters: dict[tuple[str, ...], Callable[[dict[str, Any]], tuple]] = {}

    def conn(self) -> Any:
        if self._fairy is None or self._pid != _PID:  # a forked child opens its own
            self._fairy = self.engine.raw_connection()
            self._pid = _PID
        return self._fairy.dbapi_connection

    def close(self) -> None:
        if self._fairy is not None and self._pid == _PID:
            self._fairy.close()
        self._fairy = None

    def sql(self, stmt: Any, params: dict[str, Any]) -> tuple[str, tuple[str, ...] | None]:
        """The statement's SQL for these parameters (an INSERT names the columns given)."""
        ident = (id(stmt), *params)
        found = self._compiled.get(ident)
        if found is None:
            compiled = stmt.compile(dialect=self.engine.dialect, column_keys=list(params))
            positional = self.engine.dialect.positional
            found = (compiled.string, tuple(compiled.positiontup) if positional else None)
            self._compiled[ident] = found
        return found

    def args(self, keys: tuple[str, ...] | None, params: dict[str, Any]) -> Any:
        """The statement's parameters in its placeholders' order (``keys``; None: by name)."""
        if keys is None:
            return params
        get = self._getters.get(keys)
        if get is None:
            get = self._getters[keys] = _getter(keys)
        return get(params)

    def execute(self, cur: Any, stmt: Any, params: dict[str, Any] | list[dict[str, Any]]) -> None:
        if isinstance(params, list):
            if params:
                text, keys = self.sql(stmt, params[0])
                cur.executemany(text, [self.args(keys, p) for p in params])
        else:
            text, keys = self.sql(stmt, params)
            cur.execute(text, self.args(keys, params))

    def read(self, stmt: Any, params: dict[str, Any]) -> tuple | None:
        conn = self.conn()
        cur = conn.cursor()
        try:
            self.execute(cur, stmt, params)
            return cur.fetchone()
        finally:
            cur.close()
            if not self.sqlite:
                conn.rollback()  # end the read's transaction

    @contextlib.contextmanager
    def write(self, *, lock: bool = False) -> Iterator[Any]:
        """A transaction on the kept connection (``lock``: holding the store's write lock from
        its start, as :meth:`StoreBase._writing`)."""
        conn = self.conn()
        cur = conn.cursor()
        try:
            if self.sqlite:
                cur.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
            elif lock:
                cur.execute(PG_WRITE_LOCK)
            yield cur
        except BaseException:
            conn.rollback()
            raise
        else:
            conn.commit()
        finally:
            cur.close()



class StoreBase:
    """What every part of the store shares: the engine, the kept connection, the write lock and
    statements built once per dialect. The parts (runs, items, calls, leases) add the rows they
    own; :class:`intellagent.store.Store` puts them together and commits their buffers."""

    url: str
    engine: sa.Engine
    _hot: HotConnection

    def _maybe_flush(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """A transaction that holds the write lock from its start."""
        conn = self.engine.connect()
        conn.info["immediate"] = True
        try:
            with conn.begin():
                if self.engine.dialect.name == "postgresql":
                    conn.exec_driver_sql(PG_WRITE_LOCK)
                yield conn
        finally:
            conn.info.pop("immediate", None)
            conn.close()

    def _dialect_insert(self, table: Any) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _insert_ignore(self, model: type[SQLModel]) -> Any:
        """INSERT that leaves an existing row (same primary key) as it is: several processes may
        finish the same item."""
        return self._dialect_insert(model.__table__).on_conflict_do_nothing()

    def _statement(self, name: str, build: Any) -> Any:
        """A dialect-specific statement, built once per store by ``build()``."""
        cache = self.__dict__.setdefault("_statements", {})
        if name not in cache:
            cache[name] = build()
        return cache[name]
