"""The store: SQLModel over SQLite (one file per workspace) or any SQLAlchemy URL, safe for
several processes on one store.

It is cut along its seams: :mod:`~intellagent.store.schema` (tables and numbered migrations),
:mod:`~intellagent.store.runs` (runs), :mod:`~intellagent.store.items` (step items and what each
run used), :mod:`~intellagent.store.calls` (the call log and the response cache) and
:mod:`~intellagent.store.leases` (claims, shared work units, rate grants). :class:`Store` puts
them together over one connection and commits their buffered rows in one transaction.
"""

from __future__ import annotations

import os
import shutil
import time
import weakref
from pathlib import Path

import sqlalchemy as sa

from intellagent.errors import IntellagentError
from intellagent.store.calls import INSERT_CALL, CallLog
from intellagent.store.connection import (HotConnection, normalize_url, safe_url, sqlite_begin,
                                          sqlite_pragmas, sqlite_read_pragmas, url_password,
                                          url_problem)
from intellagent.store.items import ItemRecords
from intellagent.store.leases import HOST, RELEASE, Leases
from intellagent.store.read_only import (ReadOnlyStore, cannot_write, read_only_args, read_only_url,
                                         sqlite_path)
from intellagent.store.runs import RunRecords
from intellagent.store.schema import (MIGRATIONS, LLMCallRow, StoreError, applied, check_ours, check_version,
                                      integrity_problems, migrate, schema_problems)

__all__ = ["HOST", "MIGRATIONS", "STORE_VARIABLE", "LLMCallRow", "ReadOnlyStore", "Store",
           "normalize_url", "open_existing", "open_store", "store_url", "url_password"]

STORE_VARIABLE = "INTELLAGENT_STORE"


def store_url(url: str | None = None, default: str | None = None) -> str | None:
    """The store's URL: ``url`` (--store), else the ``INTELLAGENT_STORE`` environment variable,
    else ``default`` (the pipeline's ``store:``, checked with the pipeline); one that cannot be a
    store's is refused naming the flag or the variable it came from."""
    for value, where in ((url, "--store"), (os.environ.get(STORE_VARIABLE), STORE_VARIABLE)):
        if value:
            problem = url_problem(value)
            if problem:
                raise IntellagentError(problem, item=where)
            return value
    return default


def open_store(workspace: str | Path, url: str | None = None, default: str | None = None) -> "Store":
    """The store of a run: ``url`` (--store), else the ``INTELLAGENT_STORE`` environment
    variable, else ``default`` (the pipeline's ``store:``), else ``intellagent.db`` in the
    workspace."""
    url = store_url(url, default)
    if url:
        Path(workspace).mkdir(parents=True, exist_ok=True)  # reports still go to the workspace
        return Store(url)
    return Store.for_workspace(workspace)


def open_existing(workspace: str | Path, url: str | None = None, *, read_only: bool = True) -> "Store":
    """The store of a workspace that must already exist, for a command that reads its runs:
    opened read-only (unless ``read_only`` is False), so a workspace the user may not write still
    serves it; the one at ``url`` (--store) or $INTELLAGENT_STORE when given."""
    url = store_url(url)
    if url:
        return Store(url, read_only=read_only)
    if not (Path(workspace) / "intellagent.db").is_file():
        raise IntellagentError("no intellagent.db here: not a workspace", file=workspace)
    return Store(f"sqlite:///{Path(workspace) / 'intellagent.db'}", read_only=read_only)


class Store(RunRecords, ItemRecords, CallLog, Leases):
    """Rows of runs, model calls, cached responses, step items and leases; safe for several
    processes on one store (inserts are idempotent, migrations and claims take the write lock).

    An answered model call (its row and its cache entry) is committed before the event loop
    waits for anything, with the other answers of the same loop turn (at once outside a loop;
    within ``answer_window`` while a run's steps execute): a run killed after that never pays
    again for an answer it got. Other rows (cache hits, failures, items, artefacts, run records,
    released claims) are buffered, committed at most ``FLUSH_SECONDS`` or ``FLUSH_ROWS`` apart
    and on :meth:`flush`, after the calls that made them.
    """

    FLUSH_SECONDS = 0.25
    FLUSH_ROWS = 64

    def __init__(self, url: str, *, read_only: bool = False, check: bool = True) -> None:
        """Open the store at ``url``: migrated to this version's schema (``read_only``: never
        written, for commands that only read runs), then (``check``) its tables and, on SQLite,
        the file's pages checked, so a store that cannot serve a run is refused before any work."""
        url = normalize_url(url)
        self.url = url
        self.read_only = read_only
        self._pending_calls = []
        self._answers, self._answered, self._answers_due = [], {}, None
        self._pending_items = {}
        self._pending_artefacts = {}
        self._replacing = set()
        self._pending_run_items = []
        self._pending_releases = []
        self._last_flush = time.monotonic()
        engine_url = url
        if read_only:
            engine_url, scratch = read_only_url(url)
            if scratch is not None:  # a copy read in place of a store left by a killed run
                weakref.finalize(self, shutil.rmtree, scratch, True)
        try:
            self.engine = sa.create_engine(engine_url, **(read_only_args(url) if read_only else {}))
        except ModuleNotFoundError as exc:
            raise IntellagentError(f"the store needs the '{exc.name}' driver: pip install "
                                   "'intellagent[postgres]'", item="store") from None
        except sa.exc.ArgumentError as exc:
            raise IntellagentError(f"not a store URL: {exc}", item="store") from None
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", sqlite_read_pragmas if read_only else sqlite_pragmas)
            sa.event.listen(self.engine, "begin", sqlite_begin)
        self._hot = HotConnection(self.engine)
        where = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
        try:
            if read_only:
                with self.engine.connect() as conn:
                    check_ours(conn)
                    check_version(applied(conn), read_only=True)
            else:
                self.migrate()
            problems = self.problems() if check else []
        except StoreError as exc:
            raise StoreError(exc.message, file=where, item=None if where else safe_url(url)) from None
        except sa.exc.DatabaseError as exc:
            why = None if read_only else cannot_write(exc, sqlite_path(url))
            if why:
                raise ReadOnlyStore(why, file=where, item=None if where else safe_url(url)) from None
            raise IntellagentError(f"not a usable IntellAgent store: {exc.orig or exc}"
                                   .split("\n")[0], file=where,
                                   item=None if where else safe_url(url)) from None
        if problems:
            more = f" ({len(problems) - 1} more: intellagent store check)" if len(problems) > 1 else ""
            raise StoreError(problems[0] + more, file=where, item=None if where else safe_url(url))

    def problems(self, *, thorough: bool = False) -> list[str]:
        """What keeps the store from serving a run: a table or column it lacks, and on SQLite a
        damaged file (``thorough``: SQLite's full integrity check, indexes included)."""
        with self.engine.connect() as conn:
            return schema_problems(conn) + integrity_problems(conn, thorough=thorough)

    def describe(self) -> str:
        """Its schema version and how many runs, items and model calls it holds."""
        from intellagent.store.schema import SCHEMA, ItemRow, LLMCallRow, RunRow

        with self.engine.connect() as conn:
            done = applied(conn)
            counts = [conn.execute(sa.select(sa.func.count()).select_from(t.__table__)).scalar()
                      for t in (RunRow, ItemRow, LLMCallRow)]
        return (f"schema at migration {max(done, default=0)} of {SCHEMA}; {counts[0]} run(s), "
                f"{counts[1]} item(s), {counts[2]} model call(s)")

    @classmethod
    def for_workspace(cls, workspace: str | Path) -> "Store":
        folder = Path(workspace)
        if folder.exists() and not folder.is_dir():
            raise IntellagentError("the workspace is a file, expected a folder", file=folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (NotADirectoryError, FileExistsError):
            raise IntellagentError("cannot make the workspace: a part of its path is a file",
                                   file=folder) from None
        except PermissionError as exc:
            raise IntellagentError(f"cannot make the workspace: {exc.strerror}", file=folder) from None
        return cls(f"sqlite:///{folder / 'intellagent.db'}")

    @classmethod
    def in_memory(cls) -> "Store":
        return cls("sqlite://")

    def migrate(self) -> list[int]:
        """Bring the store's schema up to date (:data:`~intellagent.store.schema.MIGRATIONS`)."""
        with self._writing() as conn:  # two processes starting on a new store: one migrates
            done = migrate(conn)
            # a write that changes no row: SQLite opens a file it may not write read-only without
            # a word, and its first write would fail in the middle of the command's work
            conn.exec_driver_sql("DELETE FROM migrations WHERE 1 = 0")
            return done

    def flush_due(self) -> None:
        """Commit what is buffered if ``FLUSH_SECONDS`` have passed since the last commit: a run
        calls it on a timer, so rows are committed that far apart even while no new row comes
        (another process of the run waits for an item this one has finished)."""
        if time.monotonic() - self._last_flush >= self.FLUSH_SECONDS:
            self.flush()

    def _maybe_flush(self) -> None:
        buffered = len(self._pending_calls) + len(self._pending_run_items) + len(self._pending_artefacts)
        if buffered >= self.FLUSH_ROWS:
            self.flush()
        else:
            self.flush_due()

    def flush(self) -> None:
        """Commit every buffered call row, item, artefact, run item and released claim, in one
        transaction: an item is never in the store without the model calls that made it, and a
        claim is given up with the item it was taken for."""
        self._last_flush = time.monotonic()
        self.commit_answers()  # first: an item is never in the store without the calls that made it
        if not (self._pending_calls or self._pending_items or self._pending_run_items
                or self._pending_releases or self._pending_artefacts):
            return
        calls, self._pending_calls = self._pending_calls, []
        items, self._pending_items = self._pending_items, {}
        artefacts, self._pending_artefacts = self._pending_artefacts, {}
        run_items, self._pending_run_items = self._pending_run_items, []
        releases, self._pending_releases = self._pending_releases, []
        with self._hot.write() as cur:
            self._hot.execute(cur, INSERT_CALL, calls)
            for statement, rows in self._item_writes(items):
                self._hot.execute(cur, statement, rows)
            self._hot.execute(cur, self._statement("run_item", self._upsert_run_item), run_items)
            self._hot.execute(cur, self._artefact_insert(), list(artefacts.values()))
            self._hot.execute(cur, RELEASE, releases)
