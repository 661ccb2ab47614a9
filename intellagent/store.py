"""The store: SQLModel over SQLite (one file per workspace) or any SQLAlchemy URL.

Every model call is a row (the cost report and the debugging trail), every cacheable response is
a row keyed by the hash of its request (the cache). Schema changes are append-only numbered
migrations recorded in ``migrations``.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from sqlmodel import Field, SQLModel, select

from intellagent.errors import IntellagentError


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    id: str = Field(primary_key=True)
    created_at: float
    environment: str | None = None
    seed: int = 0
    config: str = "{}"
    status: str = "running"


class LLMCallRow(SQLModel, table=True):
    __tablename__ = "llm_calls"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str | None = Field(default=None, index=True)
    stage: str | None = None
    role: str
    model: str
    provider: str
    request_hash: str = Field(index=True)
    kind: str  # "chat" | "structured"
    cached: bool = False
    attempts: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
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


class MigrationRow(SQLModel, table=True):
    __tablename__ = "migrations"
    id: int = Field(primary_key=True)
    name: str
    applied_at: float


def _create(*models: type[SQLModel]) -> Callable[[sa.Connection], None]:
    def apply(conn: sa.Connection) -> None:
        SQLModel.metadata.create_all(conn, tables=[m.__table__ for m in models])
    return apply


#: Append-only: never edit an applied migration, add the next number.
MIGRATIONS: list[tuple[int, str, Callable[[sa.Connection], None]]] = [
    (1, "runs, llm_calls, llm_cache", _create(RunRow, LLMCallRow, CachedResponseRow)),
    (2, "artefacts", _create(ArtefactRow)),
    (3, "items, run_items", _create(ItemRow, RunItemRow)),
]


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


class Store:
    """Rows of runs, model calls and cached responses.

    Call rows and cache entries are buffered and committed together, at most ``FLUSH_SECONDS``
    or ``FLUSH_ROWS`` apart, and on :meth:`flush`: a commit per call would cost more than the
    call itself against a fast server. Callers flush before recording that a work item is done,
    so a finished item's calls are always in the store.
    """

    FLUSH_SECONDS = 0.25
    FLUSH_ROWS = 64

    def __init__(self, url: str) -> None:
        self.url = url
        self._pending_calls: list[dict[str, Any]] = []
        self._pending_cache: dict[str, dict[str, Any]] = {}
        self._pending_items: dict[str, dict[str, Any]] = {}
        self._pending_run_items: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self.engine = sa.create_engine(url)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            self.migrate()
        except sa.exc.DatabaseError as exc:
            where = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
            raise IntellagentError(f"not a usable IntellAgent store: {exc.orig or exc}"
                                   .split("\n")[0], file=where) from None

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
        applied_now = []
        with self.engine.begin() as conn:
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
        with self.engine.begin() as conn:
            conn.execute(sa.insert(RunRow.__table__).values(
                id=run_id, created_at=time.time(), environment=environment, seed=seed,
                config=json.dumps(config or {})))
        return run_id

    def resolve_run(self, run: str) -> str:
        """A run id, or ``latest``."""
        with self.engine.connect() as conn:
            if run == "latest":
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .order_by(RunRow.__table__.c.created_at.desc()).limit(1)).first()
            else:
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .where(RunRow.__table__.c.id == run)).first()
        if row is None:
            raise IntellagentError(f"no run '{run}' in this workspace", item=self.url)
        return row[0]

    # -- model calls -----------------------------------------------------------------------

    def record_call(self, **fields: Any) -> None:
        """A call that got no answer (or a cache hit): its row, buffered."""
        fields.setdefault("created_at", time.time())
        self._pending_calls.append({**_CALL_DEFAULTS, **fields})
        self._maybe_flush()

    def record_answer(self, call: dict[str, Any], *, cache: dict[str, Any] | None = None) -> None:
        """The row of an answered call and, when given, its cache entry, buffered together."""
        call.setdefault("created_at", time.time())
        self._pending_calls.append({**_CALL_DEFAULTS, **call})
        if cache is not None:
            self._pending_cache.setdefault(cache["request_hash"], {
                **cache, "response": json.dumps(cache["response"], sort_keys=True),
                "created_at": call["created_at"]})
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if (len(self._pending_calls) + len(self._pending_run_items) >= self.FLUSH_ROWS
                or time.monotonic() - self._last_flush >= self.FLUSH_SECONDS):
            self.flush()

    def flush(self) -> None:
        """Commit every buffered call row, cache entry and item, in one transaction: an item is
        never in the store without the model calls that made it."""
        self._last_flush = time.monotonic()
        if not (self._pending_calls or self._pending_cache or self._pending_items
                or self._pending_run_items):
            return
        calls, self._pending_calls = self._pending_calls, []
        cache, self._pending_cache = self._pending_cache, {}
        items, self._pending_items = self._pending_items, {}
        run_items, self._pending_run_items = self._pending_run_items, []
        with self.engine.begin() as conn:
            if calls:
                conn.execute(_INSERT_CALL, calls)
            if cache:
                conn.execute(self._insert_ignore(CachedResponseRow), list(cache.values()))
            if items:
                conn.execute(self._insert_ignore(ItemRow), list(items.values()))
            if run_items:
                conn.execute(self._upsert_run_item(), run_items)

    def calls(self, run_id: str | None = None) -> list[LLMCallRow]:
        self.flush()
        with self.engine.connect() as conn:
            query = select(LLMCallRow)
            if run_id is not None:
                query = query.where(LLMCallRow.run_id == run_id)
            return [LLMCallRow.model_validate(r._mapping) for r in conn.execute(
                query.order_by(LLMCallRow.id))]

    def cost_summary(self, run_id: str) -> list[dict[str, Any]]:
        """Calls, tokens and dollars by stage and model for one run."""
        self.flush()
        t = LLMCallRow.__table__.c
        query = (sa.select(t.stage, t.model, sa.func.count().label("calls"),
                           sa.func.sum(sa.cast(t.cached, sa.Integer)).label("cached"),
                           sa.func.sum(t.prompt_tokens).label("prompt_tokens"),
                           sa.func.sum(t.completion_tokens).label("completion_tokens"),
                           sa.func.sum(t.cost_usd).label("cost_usd"),
                           sa.func.sum(sa.cast(t.outcome != "ok", sa.Integer)).label("failed"))
                 .where(t.run_id == run_id).group_by(t.stage, t.model).order_by(t.stage, t.model))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    # -- cache -----------------------------------------------------------------------------

    def cached(self, request_hash: str) -> CachedResponseRow | None:
        pending = self._pending_cache.get(request_hash)
        if pending is not None:
            return CachedResponseRow.model_validate(pending)
        with self.engine.connect() as conn:
            row = conn.execute(_CACHE_GET, {"h": request_hash}).first()
        return CachedResponseRow.model_validate(row._mapping) if row else None

    # -- items -----------------------------------------------------------------------------

    def item(self, key: str) -> ItemRow | None:
        """A finished item by its key, or None."""
        pending = self._pending_items.get(key)
        if pending is not None:
            return ItemRow.model_validate(pending)
        with self.engine.connect() as conn:
            row = conn.execute(_ITEM_GET, {"k": key}).first()
        return ItemRow.model_validate(row._mapping) if row else None

    def put_item(self, *, key: str, step: str, status: str, halt: bool, note: str, scores: str,
                 payload: str, value_hash: str) -> None:
        """Record a finished item (buffered; committed after the calls that made it)."""
        self._pending_items.setdefault(key, dict(
            key=key, step=step, status=status, halt=halt, note=note, scores=scores,
            payload=payload, value_hash=value_hash, created_at=time.time()))
        self._maybe_flush()

    def record_run_item(self, run_id: str, step: str, item: str, pos: str, key: str,
                        status: str) -> None:
        """Note that ``run_id`` used (or made) item ``key`` as ``step``'s item ``item``."""
        self._pending_run_items.append(dict(run_id=run_id, step=step, item=item, pos=pos, key=key,
                                            status=status))
        self._maybe_flush()

    def run_items(self, run_id: str, step: str | None = None, *, prefix: str | None = None,
                  payload: bool = False) -> Iterator[dict[str, Any]]:
        """The items of a run in position order (step, item, status, scores, and the payload when
        asked), streamed from the store."""
        self.flush()
        ri, it = RunItemRow.__table__.c, ItemRow.__table__.c
        columns = [ri.step, ri.item, ri.pos, ri.key, ri.status, it.halt, it.note, it.scores,
                   it.value_hash]
        if payload:
            columns.append(it.payload)
        query = sa.select(*columns).join_from(RunItemRow.__table__, ItemRow.__table__,
                                              ri.key == it.key).where(ri.run_id == run_id)
        if step is not None:
            query = query.where(ri.step == step)
        if prefix:
            query = query.where(ri.item.startswith(prefix + "/", autoescape=True))
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=500).execute(query.order_by(ri.pos, ri.step))
            for row in result:
                yield dict(row._mapping)

    def _insert_ignore(self, model: type[SQLModel]) -> Any:
        """INSERT that leaves an existing row (same primary key) as it is: several processes may
        finish the same item."""
        table = model.__table__
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table).on_conflict_do_nothing()

    def _upsert_run_item(self) -> Any:
        table = RunItemRow.__table__
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        stmt = insert(table)
        return stmt.on_conflict_do_update(index_elements=["run_id", "step", "item"],
                                          set_={"key": stmt.excluded.key, "pos": stmt.excluded.pos,
                                                "status": stmt.excluded.status})

    # -- artefacts ---------------------------------------------------------------------------

    def artefact(self, kind: str, key: str) -> str | None:
        """The JSON payload of a finished item, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(_ARTEFACT_GET, {"k": kind, "h": key}).first()
        return row[0] if row else None

    def put_artefact(self, kind: str, key: str, payload: str, *, run_id: str | None = None,
                     item: str | None = None) -> None:
        """Record a finished item. Its model calls are committed first, so a finished item's
        calls are always in the log; an existing item is left as it is."""
        self.flush()
        with self.engine.begin() as conn:
            if conn.execute(_ARTEFACT_HAS, {"k": kind, "h": key}).first() is None:
                conn.execute(sa.insert(ArtefactRow.__table__).values(
                    kind=kind, key=key, run_id=run_id, item=item, payload=payload,
                    created_at=time.time()))

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
    "latency_ms": 0.0, "cost_usd": 0.0}
_INSERT_CALL = sa.insert(LLMCallRow.__table__)
_INSERT_CACHE = sa.insert(CachedResponseRow.__table__)
_CACHE_TABLE = CachedResponseRow.__table__
_CACHE_GET = sa.select(_CACHE_TABLE).where(_CACHE_TABLE.c.request_hash == sa.bindparam("h"))
_ITEM_GET = sa.select(ItemRow.__table__).where(ItemRow.__table__.c.key == sa.bindparam("k"))
_ART = ArtefactRow.__table__
_ARTEFACT_GET = sa.select(_ART.c.payload).where(_ART.c.kind == sa.bindparam("k"),
                                                _ART.c.key == sa.bindparam("h"))
_ARTEFACT_HAS = sa.select(_ART.c.key).where(_ART.c.kind == sa.bindparam("k"),
                                            _ART.c.key == sa.bindparam("h"))
