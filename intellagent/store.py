"""The store: SQLModel over SQLite (one file per workspace) or any SQLAlchemy URL.

Every model call is a row (the cost report and the debugging trail), every cacheable response is
a row keyed by the hash of its request (the cache). Schema changes are append-only numbered
migrations recorded in ``migrations``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from sqlmodel import Field, SQLModel, select

from intellagent.errors import IntellagentError

HOST = socket.gethostname()


def _owner_alive(owner: str) -> bool:
    """A claim's owner ("host:pid:run") is alive, as far as this machine can tell."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host != HOST or not pid.isdigit() or _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    id: str = Field(primary_key=True)
    created_at: float
    environment: str | None = None
    seed: int = 0
    config: str = "{}"
    status: str = "running"
    pid: int | None = None  # the process running it, to tell a killed run from a running one
    host: str | None = None


class LLMCallRow(SQLModel, table=True):
    __tablename__ = "llm_calls"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    stage: str | None = None
    role: str
    model: str
    provider: str
    request_hash: str = Field(index=True)
    item_key: str | None = Field(default=None, index=True)  # the step item the call was made for
    kind: str  # "chat" | "structured"
    cached: bool = False
    attempts: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0  # from the request to its answer (with retries and back-off)
    queue_ms: float = 0.0  # before: waiting for a concurrency slot and the rate limits
    cost_usd: float = 0.0
    outcome: str  # "ok" | "infra-error" | "budget-exhausted"
    error: str | None = None
    created_at: float


class CachedResponseRow(SQLModel, table=True):
    __tablename__ = "llm_cache"
    request_hash: str = Field(primary_key=True)
    model: str
    kind: str
    response: str  # JSON
    prompt_tokens: int = 0
    completion_tokens: int = 0
    created_at: float


class ArtefactRow(SQLModel, table=True):
    """A finished work item, keyed by the content hash of everything that produced it."""

    __tablename__ = "artefacts"
    kind: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    item: str | None = None
    payload: str  # JSON
    created_at: float


class ItemRow(SQLModel, table=True):
    """A finished step item, keyed by the content hash of everything that produced it: the step's
    plugin and version, its options, its inputs' hashes, the seed, the models of its roles."""

    __tablename__ = "items"
    key: str = Field(primary_key=True)
    step: str  # the plugin that made it
    status: str = "ok"
    halt: bool = False
    note: str = ""
    warnings: str = "[]"  # JSON list of strings
    scores: str = "[]"  # JSON list of Score
    payload: str  # JSON of the value
    value_hash: str  # sha256 of payload: the item's identity for the steps that consume it
    created_at: float


class RunItemRow(SQLModel, table=True):
    """Which items a run used or made, under which step name and item key."""

    __tablename__ = "run_items"
    run_id: str = Field(primary_key=True)
    step: str = Field(primary_key=True)  # the step's name in the pipeline
    item: str = Field(primary_key=True)  # "" for a once-step, "E0001", "E0001/3" when nested
    pos: str  # sortable position (zero-padded indices)
    key: str = Field(index=True)
    status: str


class ClaimRow(SQLModel, table=True):
    """An item some process is computing now, so another one waits instead of paying twice."""

    __tablename__ = "claims"
    key: str = Field(primary_key=True)
    owner: str
    expires_at: float


class WorkUnitRow(SQLModel, table=True):
    """One item of a run's shared fan-out: which process works on it, and whether it is done.
    Processes of one run (an executor's workers) take units instead of all doing every item."""

    __tablename__ = "work_units"
    run_id: str = Field(primary_key=True)
    unit: str = Field(primary_key=True)
    owner: str
    expires_at: float
    done: bool = False


class RateGrantRow(SQLModel, table=True):
    """Requests and tokens granted to a model call, for a rate limit shared by processes."""

    __tablename__ = "rate_grants"
    id: int | None = Field(default=None, primary_key=True)
    bucket: str = Field(index=True)
    at: float = Field(index=True)
    requests: int = 1
    tokens: int = 0


class MigrationRow(SQLModel, table=True):
    __tablename__ = "migrations"
    id: int = Field(primary_key=True)
    name: str
    applied_at: float


def _create(*models: type[SQLModel]) -> Callable[[sa.Connection], None]:
    def apply(conn: sa.Connection) -> None:
        SQLModel.metadata.create_all(conn, tables=[m.__table__ for m in models])
    return apply


def _add_columns(table: str, columns: dict[str, str], index: tuple[str, ...] = ()) -> Callable[[sa.Connection], None]:
    """Columns added to an existing table (a new store already has them: migration 1 creates
    tables from today's models)."""
    def apply(conn: sa.Connection) -> None:
        have = {c["name"] for c in sa.inspect(conn).get_columns(table)}
        for name, kind in columns.items():
            if name not in have:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        for name in index:
            conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS ix_{table}_{name} ON {table} ({name})")
    return apply


def _all(*steps: Callable[[sa.Connection], None]) -> Callable[[sa.Connection], None]:
    def apply(conn: sa.Connection) -> None:
        for step in steps:
            step(conn)
    return apply


#: Append-only: never edit an applied migration, add the next number.
MIGRATIONS: list[tuple[int, str, Callable[[sa.Connection], None]]] = [
    (1, "runs, llm_calls, llm_cache", _create(RunRow, LLMCallRow, CachedResponseRow)),
    (2, "artefacts", _create(ArtefactRow)),
    (3, "items, run_items", _create(ItemRow, RunItemRow)),
    (4, "claims; llm_calls.item_key; runs.pid, runs.host", _all(
        _create(ClaimRow), _add_columns("llm_calls", {"item_key": "VARCHAR"}, index=("item_key",)),
        _add_columns("runs", {"pid": "INTEGER", "host": "VARCHAR"}))),
    (5, "items.warnings", _add_columns("items", {"warnings": "VARCHAR DEFAULT '[]'"})),
    (6, "llm_calls.queue_ms", _add_columns("llm_calls", {"queue_ms": "FLOAT DEFAULT 0"})),
    (7, "work_units, rate_grants", _create(WorkUnitRow, RateGrantRow)),
    # request keys hash compact text from here on; entries cached before keep their old keys
    # and are read through them (Store.cached), so the migration itself changes nothing
    (8, "llm_cache: compact request keys", lambda conn: None),
]
COMPACT_KEYS = 8

UNFINISHED = ("infra-error", "budget-exhausted")  # items a later run computes again
STORE_VARIABLE = "INTELLAGENT_STORE"
PG_WRITE_LOCK = "SELECT pg_advisory_xact_lock(4242)"  # the store's one write lock on PostgreSQL


def url_password(url: str) -> str | None:
    try:
        return sa.engine.make_url(url).password
    except Exception:
        return None


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean the psycopg (3) driver, the one
    ``intellagent[postgres]`` installs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _safe(url: str) -> str:
    """The URL as it may be printed (without a password)."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "store"


def open_store(workspace: str | Path, url: str | None = None, default: str | None = None) -> "Store":
    """The store of a run: ``url`` (--store), else the ``INTELLAGENT_STORE`` environment
    variable, else ``default`` (the pipeline's ``store:``), else ``intellagent.db`` in the
    workspace."""
    url = url or os.environ.get(STORE_VARIABLE) or default
    if url:
        Path(workspace).mkdir(parents=True, exist_ok=True)  # reports still go to the workspace
        return Store(url)
    return Store.for_workspace(workspace)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we say BEGIN ourselves (SQLAlchemy's pysqlite recipe)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    # IMMEDIATE: take the write lock when the transaction starts, so two processes never both
    # read "not there yet" and then both write (migrations, claims)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN")


class _Hot:
    """The statements run per model call and per item, compiled once for the store's dialect
    and executed on one DBAPI connection kept open: SQLAlchemy's per-statement machinery costs
    more CPU than SQLite itself (about 0.3 ms against 0.05 ms for a committed insert)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self._fairy: Any = None
        self._pid = 0
        self._compiled: dict[tuple, tuple[str, tuple[str, ...] | None]] = {}

    def conn(self) -> Any:
        if self._fairy is None or self._pid != os.getpid():  # a forked child opens its own
            self._fairy = self.engine.raw_connection()
            self._pid = os.getpid()
        return self._fairy.dbapi_connection

    def close(self) -> None:
        if self._fairy is not None and self._pid == os.getpid():
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

    @staticmethod
    def args(keys: tuple[str, ...] | None, params: dict[str, Any]) -> Any:
        return params if keys is None else tuple(params[k] for k in keys)

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
        its start, as :meth:`Store._writing`)."""
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


class Store:
    """Rows of runs, model calls, cached responses, step items and claims; safe for several
    processes on one store (inserts are idempotent, migrations and claims take the write lock).

    An answered model call (its row and its cache entry) is committed at once (about 0.15 ms on
    SQLite): a run killed at any moment never pays again for an answer it got. Other rows (cache
    hits, failures, items, run records) are buffered, committed at most ``FLUSH_SECONDS`` or
    ``FLUSH_ROWS`` apart and on :meth:`flush`, after the calls that made them.
    """

    FLUSH_SECONDS = 0.25
    FLUSH_ROWS = 64

    def __init__(self, url: str) -> None:
        url = normalize_url(url)
        self.url = url
        self._pending_calls: list[dict[str, Any]] = []
        self._pending_items: dict[str, dict[str, Any]] = {}
        self._pending_run_items: list[dict[str, Any]] = []
        self._pending_releases: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        try:
            self.engine = sa.create_engine(url)
        except ModuleNotFoundError as exc:
            raise IntellagentError(f"the store needs the '{exc.name}' driver: pip install "
                                   "'intellagent[postgres]'", item="store") from None
        except sa.exc.ArgumentError as exc:
            raise IntellagentError(f"not a store URL: {exc}", item="store") from None
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            sa.event.listen(self.engine, "begin", _sqlite_begin)
        self._hot = _Hot(self.engine)
        try:
            self.migrate()
        except sa.exc.DatabaseError as exc:
            where = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
            raise IntellagentError(f"not a usable IntellAgent store: {exc.orig or exc}"
                                   .split("\n")[0], file=where,
                                   item=None if where else _safe(url)) from None

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

    def migrate(self) -> list[int]:
        applied_now = []
        with self._writing() as conn:  # two processes starting on a new store: one migrates
            SQLModel.metadata.create_all(conn, tables=[MigrationRow.__table__])
            done = {r[0] for r in conn.execute(sa.select(MigrationRow.__table__.c.id))}
            for number, name, apply in MIGRATIONS:
                if number in done:
                    continue
                apply(conn)
                conn.execute(sa.insert(MigrationRow.__table__).values(
                    id=number, name=name, applied_at=time.time()))
                applied_now.append(number)
        return applied_now

    # -- runs ------------------------------------------------------------------------------

    def start_run(self, *, environment: str | None = None, seed: int = 0,
                  config: dict | None = None, run_id: str | None = None) -> str:
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.reap()
        with self.engine.begin() as conn:
            conn.execute(sa.insert(RunRow.__table__).values(
                id=run_id, created_at=time.time(), environment=environment, seed=seed,
                config=json.dumps(config or {}), pid=os.getpid(), host=HOST))
        return run_id

    def reap(self) -> list[str]:
        """Runs still marked running whose process (on this machine) is gone: interrupted."""
        t = RunRow.__table__.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.id, t.pid).where(t.status == "running", t.host == HOST)).all()
        dead = [run_id for run_id, pid in rows if pid is not None and not _alive(pid)]
        for run_id in dead:
            self.set_run_status(run_id, "interrupted")
        return dead

    def resumable_run(self, identity: str, *, look_back: int = 50) -> tuple[str, str] | None:
        """The latest run with this identity that did not finish (killed, failed, stopped by
        the budget, or done with items that could not finish), unless a live process runs it
        now: (its id, the folder its report goes to)."""
        self.reap()
        t = RunRow.__table__.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.id, t.status, t.config).order_by(t.created_at.desc())
                                .limit(look_back)).all()
            for run_id, status, config in rows:
                data = json.loads(config or "{}")
                if data.get("identity") != identity:
                    continue
                if status == "running":
                    return None  # another process is on it now: this one is a run of its own
                unfinished = status in ("interrupted", "failed", "budget-exhausted") or \
                    conn.execute(sa.select(RunItemRow.__table__.c.key).where(
                        RunItemRow.__table__.c.run_id == run_id,
                        RunItemRow.__table__.c.status.in_(UNFINISHED)).limit(1)).first() is not None
                return (run_id, data.get("report_folder") or run_id) if unfinished else None
        return None

    def resolve_run(self, run: str) -> str:
        """A run id, or ``latest``."""
        self.reap()
        with self.engine.connect() as conn:
            if run == "latest":
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .order_by(RunRow.__table__.c.created_at.desc()).limit(1)).first()
            else:
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .where(RunRow.__table__.c.id == run)).first()
        if row is None:
            raise IntellagentError(f"no run '{run}' in this workspace", item=_safe(self.url))
        return row[0]

    # -- model calls -----------------------------------------------------------------------

    def record_call(self, **fields: Any) -> None:
        """A call that got no answer (or a cache hit): its row, buffered."""
        fields.setdefault("created_at", time.time())
        self._pending_calls.append({**_CALL_DEFAULTS, **fields})
        self._maybe_flush()

    def record_answer(self, call: dict[str, Any], *, cache: dict[str, Any] | None = None) -> None:
        """The row of an answered call and, when given, its cache entry (``response``: the
        answer as JSON text), committed at once: an answer that was paid for is never lost to a kill."""
        call.setdefault("created_at", time.time())
        row = {**_CALL_DEFAULTS, **call}
        entry = None if cache is None else {**cache, "created_at": call["created_at"]}
        with self._hot.write() as cur:
            self._hot.execute(cur, _INSERT_CALL, row)
            if entry is not None:
                self._hot.execute(cur, self._statement("cache"), entry)

    def _statement(self, name: str) -> Any:
        """A dialect-specific statement, built once per store."""
        cache = self.__dict__.setdefault("_statements", {})
        if name not in cache:
            cache[name] = {"cache": lambda: self._insert_ignore(CachedResponseRow),
                           "artefact": lambda: self._insert_ignore(ArtefactRow),
                           "item": self._upsert_item, "run_item": self._upsert_run_item}[name]()
        return cache[name]

    def _maybe_flush(self) -> None:
        if (len(self._pending_calls) + len(self._pending_run_items) >= self.FLUSH_ROWS
                or time.monotonic() - self._last_flush >= self.FLUSH_SECONDS):
            self.flush()

    def flush(self) -> None:
        """Commit every buffered call row, cache entry and item, in one transaction: an item is
        never in the store without the model calls that made it."""
        self._last_flush = time.monotonic()
        if not (self._pending_calls or self._pending_items or self._pending_run_items
                or self._pending_releases):
            return
        calls, self._pending_calls = self._pending_calls, []
        items, self._pending_items = self._pending_items, {}
        run_items, self._pending_run_items = self._pending_run_items, []
        releases, self._pending_releases = self._pending_releases, []
        with self._hot.write() as cur:
            self._hot.execute(cur, _INSERT_CALL, calls)
            self._hot.execute(cur, self._statement("item"), list(items.values()))
            self._hot.execute(cur, self._statement("run_item"), run_items)
            self._hot.execute(cur, _RELEASE, releases)  # with the items they were claimed for

    def calls(self, run_id: str | None = None) -> list[LLMCallRow]:
        self.flush()
        with self.engine.connect() as conn:
            query = select(LLMCallRow)
            if run_id is not None:
                query = query.where(LLMCallRow.run_id == run_id)
            return [LLMCallRow.model_validate(r._mapping) for r in conn.execute(
                query.order_by(LLMCallRow.id))]

    def cost_summary(self, run_id: str, *, made_here: bool = False) -> list[dict[str, Any]]:
        """Calls, tokens and dollars by step and model of everything a run's results took,
        across the processes that made them (a run resumed after a kill counts the calls made
        before it); ``made_here``: only the calls this run made itself."""
        self.flush()
        t = LLMCallRow.__table__.c
        if made_here:
            which = t.run_id == run_id
        else:
            items = sa.select(RunItemRow.__table__.c.key).where(RunItemRow.__table__.c.run_id == run_id)
            which = sa.or_(t.item_key.in_(items), sa.and_(t.run_id == run_id, t.item_key.is_(None)))
        query = (sa.select(t.stage, t.model, sa.func.count().label("calls"),
                           sa.func.sum(sa.cast(t.cached, sa.Integer)).label("cached"),
                           sa.func.sum(t.prompt_tokens).label("prompt_tokens"),
                           sa.func.sum(t.completion_tokens).label("completion_tokens"),
                           sa.func.sum(t.cost_usd).label("cost_usd"),
                           sa.func.sum(sa.cast(t.outcome != "ok", sa.Integer)).label("failed"),
                           sa.func.avg(sa.case((t.cached == sa.false(), t.latency_ms))).label("request_ms"),
                           sa.func.avg(sa.case((t.cached == sa.false(), t.queue_ms))).label("queue_ms"))
                 .where(which).group_by(t.stage, t.model).order_by(t.stage, t.model))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    # -- cache -----------------------------------------------------------------------------

    def cached(self, request_hash: str, legacy: Callable[[], str] | None = None) -> CachedResponseRow | None:
        """The cached answer of a request; ``legacy()``: the request's key in stores made before
        migration 8, looked up when the store has answers cached before it (a hit is then
        copied under ``request_hash``, so it is found directly next time)."""
        row = self._hot.read(_CACHE_GET, {"h": request_hash})
        if row is not None:
            return CachedResponseRow.model_validate(dict(zip(_CACHE_COLUMNS, row)))
        if legacy is None or not self.legacy_keys:
            return None
        row = self._hot.read(_CACHE_GET, {"h": legacy()})
        if row is None:
            return None
        entry = {**dict(zip(_CACHE_COLUMNS, row)), "request_hash": request_hash}
        with self._hot.write() as cur:
            self._hot.execute(cur, self._statement("cache"), entry)
        return CachedResponseRow.model_validate(entry)

    @functools.cached_property
    def legacy_keys(self) -> bool:
        """Whether the cache holds answers from before migration 8, under the keys of
        ``ChatRequest.legacy_key`` (asked once per store object: none are written after it)."""
        migrations, cache = MigrationRow.__table__.c, CachedResponseRow.__table__.c
        with self.engine.connect() as conn:
            since = conn.execute(sa.select(migrations.applied_at).where(migrations.id == COMPACT_KEYS)).scalar()
            return since is not None and conn.execute(
                sa.select(cache.request_hash).where(cache.created_at < since).limit(1)).first() is not None

    # -- items -----------------------------------------------------------------------------

    def item(self, key: str) -> ItemRow | None:
        """A finished item by its key, or None."""
        pending = self._pending_items.get(key)
        if pending is not None:
            return ItemRow.model_validate(pending)
        row = self._hot.read(_ITEM_GET, {"k": key})
        return ItemRow.model_validate(dict(zip(_ITEM_COLUMNS, row))) if row else None

    def put_item(self, *, key: str, step: str, status: str, halt: bool, note: str, scores: str,
                 payload: str, value_hash: str, warnings: str = "[]") -> None:
        """Record a finished item (buffered; committed after the calls that made it)."""
        self._pending_items.setdefault(key, dict(
            key=key, step=step, status=status, halt=halt, note=note, scores=scores,
            payload=payload, value_hash=value_hash, created_at=time.time(), warnings=warnings))
        self._maybe_flush()

    def record_run_item(self, run_id: str, step: str, item: str, pos: str, key: str,
                        status: str) -> None:
        """Note that ``run_id`` used (or made) item ``key`` as ``step``'s item ``item``."""
        self._pending_run_items.append(dict(run_id=run_id, step=step, item=item, pos=pos, key=key,
                                            status=status))
        self._maybe_flush()

    def run_items(self, run_id: str, step: str | None = None, *, prefix: str | None = None,
                  payload: bool = False, scored: bool = False) -> Iterator[dict[str, Any]]:
        """The items of a run in position order (step, item, status, scores, and the payload when
        asked), streamed from the store; ``scored``: only those with scores."""
        self.flush()
        stmt = _run_items_statement(step is not None, bool(prefix), payload, scored)
        params: dict[str, Any] = {"r": run_id}
        if step is not None:
            params["s"] = step
        if prefix:
            params |= {"p": prefix + "/", "n": len(prefix) + 1}
        if not self._hot.sqlite:  # streamed by a server-side cursor
            with self.engine.connect() as conn:
                for row in conn.execution_options(yield_per=500).execute(stmt, params):
                    yield dict(row._mapping)
            return
        # SQLite: the DBAPI cursor streams rows itself; SQLAlchemy's rows cost more than the read
        text, keys = self._hot.sql(stmt, params)
        conn = self.engine.raw_connection()
        try:
            cur = conn.cursor()
            cur.execute(text, self._hot.args(keys, params))
            names = [d[0] for d in cur.description]
            while rows := cur.fetchmany(500):
                for row in rows:
                    item = dict(zip(names, row))
                    item["halt"] = bool(item["halt"])
                    yield item
        finally:
            conn.close()

    def _insert_ignore(self, model: type[SQLModel]) -> Any:
        """INSERT that leaves an existing row (same primary key) as it is: several processes may
        finish the same item."""
        return self._dialect_insert(model.__table__).on_conflict_do_nothing()

    def _upsert_item(self) -> Any:
        """An item is written once; only an unfinished one (an infra error, a budget stop) is
        replaced by its finished version."""
        table = ItemRow.__table__
        stmt = self._dialect_insert(table)
        return stmt.on_conflict_do_update(
            index_elements=["key"], where=sa.or_(*(table.c.status == sa.literal_column(f"'{s}'") for s in UNFINISHED)),
            set_={c: getattr(stmt.excluded, c) for c in ("step", "status", "halt", "note", "scores",
                                                          "payload", "value_hash", "created_at",
                                                          "warnings")})

    def _dialect_insert(self, table: Any) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _upsert_run_item(self) -> Any:
        stmt = self._dialect_insert(RunItemRow.__table__)
        return stmt.on_conflict_do_update(index_elements=["run_id", "step", "item"],
                                          set_={"key": stmt.excluded.key, "pos": stmt.excluded.pos,
                                                "status": stmt.excluded.status})

    # -- claims ----------------------------------------------------------------------------

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        """Take ``key`` for ``owner`` unless another live owner holds it (an expired claim is
        taken over: its process died)."""
        now = time.time()
        with self._hot.write(lock=True) as cur:
            self._hot.execute(cur, _CLAIM_GET, {"k": key})
            row = cur.fetchone()
            if row is not None and row[0] != owner and row[1] > now and _owner_alive(row[0]):
                return False
            self._hot.execute(cur, _CLAIM_PUT if row is None else _CLAIM_TAKE,
                              {"k": key, "o": owner, "e": now + ttl})
        return True

    def renew(self, owner: str, ttl: float) -> None:
        c = ClaimRow.__table__.c
        with self.engine.begin() as conn:
            conn.execute(sa.update(ClaimRow.__table__).where(c.owner == owner)
                         .values(expires_at=time.time() + ttl))

    def release(self, key: str, owner: str) -> None:
        """Give ``key`` up, after committing what was made for it: the claim goes with the next
        commit of buffered rows, in the same transaction as the item it was taken for."""
        self._pending_releases.append({"k": key, "o": owner})
        self._maybe_flush()

    # -- shared work -------------------------------------------------------------------------

    def take_unit(self, run_id: str, unit: str, owner: str, ttl: float) -> str:
        """Try to take a unit of a shared fan-out: "taken" (it is ``owner``'s now: a new one, or
        one whose owner died or let it expire), "done", or "busy" (a live owner has it)."""
        now = time.time()
        with self._hot.write(lock=True) as cur:
            self._hot.execute(cur, _UNIT_GET, {"r": run_id, "u": unit})
            row = cur.fetchone()
            if row is not None:
                if row[2]:
                    return "done"
                if row[0] != owner and row[1] > now and _owner_alive(row[0]):
                    return "busy"
            self._hot.execute(cur, _UNIT_PUT if row is None else _UNIT_TAKE,
                              {"r": run_id, "u": unit, "o": owner, "e": now + ttl})
        return "taken"

    def finish_unit(self, run_id: str, unit: str, owner: str) -> None:
        """Mark a unit done, after committing everything made for it."""
        self.flush()
        with self._hot.write() as cur:
            self._hot.execute(cur, _UNIT_DONE, {"r": run_id, "u": unit, "o": owner})

    def renew_units(self, owner: str, ttl: float) -> None:
        t = WorkUnitRow.__table__.c
        with self.engine.begin() as conn:
            conn.execute(sa.update(WorkUnitRow.__table__).where(t.owner == owner, t.done == sa.false())
                         .values(expires_at=time.time() + ttl))

    def take_rate(self, bucket: str, tokens: int, rpm: int | None, tpm: int | None,
                  window: float = 60.0) -> float:
        """Grant one request of ``tokens`` under limits shared by every process on this store
        (a sliding window): 0 when granted, else the seconds to wait before asking again."""
        now = time.time()
        g = RateGrantRow.__table__.c
        with self._writing() as conn:
            conn.execute(sa.delete(RateGrantRow.__table__).where(g.bucket == bucket, g.at <= now - window))
            used, spent, oldest = conn.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(g.tokens), 0), sa.func.min(g.at))
                .where(g.bucket == bucket)).one()
            fits = (rpm is None or used < rpm) and (tpm is None or used == 0 or spent + tokens <= tpm)
            if fits:
                conn.execute(sa.insert(RateGrantRow.__table__).values(bucket=bucket, at=now, tokens=tokens))
                return 0.0
        return max(0.01, (oldest + window) - now) if oldest is not None else 0.05

    # -- artefacts ---------------------------------------------------------------------------

    def artefact(self, kind: str, key: str) -> str | None:
        """The JSON payload of a finished item, or None."""
        row = self._hot.read(_ARTEFACT_GET, {"k": kind, "h": key})
        return row[0] if row else None

    def put_artefact(self, kind: str, key: str, payload: str, *, run_id: str | None = None,
                     item: str | None = None) -> None:
        """Record a finished item. Its model calls are committed first, so a finished item's
        calls are always in the log; an existing item is left as it is."""
        self.flush()
        with self._hot.write() as cur:
            self._hot.execute(cur, self._statement("artefact"), dict(
                kind=kind, key=key, run_id=run_id, item=item, payload=payload, created_at=time.time()))

    def set_run_status(self, run_id: str, status: str, **config: Any) -> None:
        """Record how a run ended; ``config`` entries are added to its stored config."""
        values: dict[str, Any] = {"status": status}
        if config:
            values["config"] = json.dumps(self.run_config(run_id) | config)
        with self.engine.begin() as conn:
            conn.execute(sa.update(RunRow.__table__).where(RunRow.__table__.c.id == run_id)
                         .values(**values))

    def run_config(self, run_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(RunRow.__table__.c.config)
                               .where(RunRow.__table__.c.id == run_id)).first()
        return json.loads(row[0]) if row and row[0] else {}


# Statements built once, so SQLAlchemy compiles them once (a call row is written per model call).
_CALL_COLUMNS = [c.name for c in LLMCallRow.__table__.columns if c.name != "id"]
_CALL_DEFAULTS = {c: None for c in _CALL_COLUMNS} | {
    "cached": False, "attempts": 1, "prompt_tokens": 0, "completion_tokens": 0,
    "latency_ms": 0.0, "queue_ms": 0.0, "cost_usd": 0.0}
_INSERT_CALL = sa.insert(LLMCallRow.__table__)
_RUN_ITEMS: dict[tuple[bool, bool, bool, bool], Any] = {}


def _run_items_statement(step: bool, prefix: bool, payload: bool, scored: bool) -> Any:
    """The query of :meth:`Store.run_items`, one per shape, made once (the compiled-SQL cache
    is keyed by the statement's identity)."""
    found = _RUN_ITEMS.get((step, prefix, payload, scored))
    if found is None:
        ri, it = RunItemRow.__table__.c, ItemRow.__table__.c
        columns = [ri.step, ri.item, ri.pos, ri.key, ri.status, it.halt, it.note, it.scores,
                   it.value_hash, it.warnings] + ([it.payload] if payload else [])
        query = sa.select(*columns).join_from(RunItemRow.__table__, ItemRow.__table__,
                                              ri.key == it.key).where(ri.run_id == sa.bindparam("r"))
        if step:
            query = query.where(ri.step == sa.bindparam("s"))
        if prefix:  # the items under ``prefix/``: substr, as startswith's LIKE needs its value escaped
            query = query.where(sa.func.substr(ri.item, sa.literal_column("1"), sa.bindparam("n"))
                                == sa.bindparam("p"))
        if scored:  # an item without scores stores "[]" (a metric's pass reads only the scored)
            query = query.where(it.scores != sa.literal_column("'[]'"))
        found = _RUN_ITEMS[(step, prefix, payload, scored)] = query.order_by(ri.pos, ri.step)
    return found


_INSERT_CACHE = sa.insert(CachedResponseRow.__table__)
_CACHE_TABLE = CachedResponseRow.__table__
_CACHE_GET = sa.select(_CACHE_TABLE).where(_CACHE_TABLE.c.request_hash == sa.bindparam("h"))
_CACHE_COLUMNS = [c.name for c in _CACHE_TABLE.columns]
_ITEM_GET = sa.select(ItemRow.__table__).where(ItemRow.__table__.c.key == sa.bindparam("k"))
_ITEM_COLUMNS = [c.name for c in ItemRow.__table__.columns]
_CLAIMS = ClaimRow.__table__
_CLAIM_GET = sa.select(_CLAIMS.c.owner, _CLAIMS.c.expires_at).where(_CLAIMS.c.key == sa.bindparam("k"))
_CLAIM_PUT = sa.insert(_CLAIMS).values(key=sa.bindparam("k"), owner=sa.bindparam("o"),
                                       expires_at=sa.bindparam("e"))
_CLAIM_TAKE = sa.update(_CLAIMS).where(_CLAIMS.c.key == sa.bindparam("k")).values(
    owner=sa.bindparam("o"), expires_at=sa.bindparam("e"))
_UNITS = WorkUnitRow.__table__
_UNIT_KEY = (_UNITS.c.run_id == sa.bindparam("r")) & (_UNITS.c.unit == sa.bindparam("u"))
_UNIT_GET = sa.select(_UNITS.c.owner, _UNITS.c.expires_at, _UNITS.c.done).where(_UNIT_KEY)
_UNIT_PUT = sa.insert(_UNITS).values(run_id=sa.bindparam("r"), unit=sa.bindparam("u"),
                                     owner=sa.bindparam("o"), expires_at=sa.bindparam("e"), done=sa.false())
_UNIT_TAKE = sa.update(_UNITS).where(_UNIT_KEY).values(owner=sa.bindparam("o"), expires_at=sa.bindparam("e"))
_UNIT_DONE = sa.update(_UNITS).where(_UNIT_KEY).values(done=sa.true())
_RELEASE = sa.delete(_CLAIMS).where(_CLAIMS.c.key == sa.bindparam("k"), _CLAIMS.c.owner == sa.bindparam("o"))
_ART = ArtefactRow.__table__
_ARTEFACT_GET = sa.select(_ART.c.payload).where(_ART.c.kind == sa.bindparam("k"),
                                                _ART.c.key == sa.bindparam("h"))

