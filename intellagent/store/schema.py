"""The store's tables (SQLModel rows) and its append-only, numbered migrations."""

from __future__ import annotations

import time
from typing import Callable

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from intellagent.errors import IntellagentError

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
    cached_tokens: int = 0  # of the prompt tokens, those the provider read from its prompt cache
    latency_ms: float = 0.0  # from the request to its answer (with retries and back-off)
    queue_ms: float = 0.0  # before: waiting for a concurrency slot and the rate limits
    cost_usd: float = 0.0
    outcome: str  # "ok" | "infra-error" | "invalid-output" | "budget-exhausted"
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
    value_hash: str  # sha256 of payload: the item's identity for the steps that consume it
    created_at: float
    run_id: str | None = None  # the run that made it (None: made before migration 9; a degraded
                                # item is reused by that run only)
    # the value, last: SQLite stores a row's columns in order, and a long value spills into
    # overflow pages that a read of any column after it walks (a report's passes over the
    # items read the columns above, 2× as fast with none after it). Stores made before keep
    # their order (a column's place changes nothing else)
    payload: str  # JSON of the value


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


class BudgetHoldRow(SQLModel, table=True):
    """A budget shared by the processes of one run: each attempt in flight holds its worst case
    here until it ends, and then leaves what it spent (``expires_at`` None). A ``refused`` row is
    the worst case of a call the budget could not pay: no process launches a call after it."""

    __tablename__ = "budget_holds"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    usd: float = 0.0
    tokens: int = 0
    expires_at: float | None = None  # a hold of a process that died stops counting then
    refused: bool = False


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
    (9, "items.run_id", _add_columns("items", {"run_id": "VARCHAR"})),
    (10, "llm_calls.cached_tokens", _add_columns("llm_calls", {"cached_tokens": "INTEGER DEFAULT 0"})),
    (11, "budget_holds", _create(BudgetHoldRow)),
]
COMPACT_KEYS = 8


#: The newest schema this version reads and writes.
SCHEMA = max(number for number, _, _ in MIGRATIONS)


class StoreError(IntellagentError):
    """A store this version cannot use (newer, damaged, missing a table): refused on open."""


def applied(conn: sa.Connection) -> dict[int, str]:
    """The migrations applied to ``conn``'s store, {number: name} (empty: a new store)."""
    if not sa.inspect(conn).has_table(MigrationRow.__tablename__):
        return {}
    return {n: name for n, name in conn.execute(sa.select(MigrationRow.__table__.c.id,
                                                          MigrationRow.__table__.c.name))}


def check_ours(conn: sa.Connection) -> None:
    """Refuse a SQLite file another application made (tables, and no migrations of ours): its
    tables would be written beside theirs. A server database may hold other applications'
    tables."""
    if conn.dialect.name != "sqlite" or sa.inspect(conn).has_table(MigrationRow.__tablename__):
        return
    theirs = sorted(t for t in sa.inspect(conn).get_table_names() if not t.startswith("sqlite_"))
    if theirs:
        raise StoreError(f"not an IntellAgent store: it holds another application's tables "
                         f"({', '.join(theirs[:5])}{', ...' if len(theirs) > 5 else ''}) and no "
                         "IntellAgent migrations; use a new file (--store, --workspace)")


def check_version(done: dict[int, str], *, read_only: bool = False) -> None:
    """Refuse a store a newer IntellAgent has migrated (it may hold rows this version would
    misread or break), and, opened read-only, one that still needs migrations it cannot apply."""
    from intellagent import __version__

    newest = max(done, default=0)
    if newest > SCHEMA:
        raise StoreError(f"this store's schema is at migration {newest} ({done[newest]}), newer than "
                         f"IntellAgent {__version__} knows (migrations 1-{SCHEMA}): use the "
                         "IntellAgent that made it, or upgrade")
    missing = [n for n, _, _ in MIGRATIONS if n not in done]
    if read_only and missing:
        raise StoreError(f"this store's schema needs migrations {missing[0]}-{missing[-1]} of "
                         f"IntellAgent {__version__}, which a read-only open cannot apply: open it "
                         "writable once (intellagent store check)")


def schema_problems(conn: sa.Connection) -> list[str]:
    """What the store lacks of the tables and columns this version uses (a table dropped, a
    column gone): every one is a query that would fail after a run's work."""
    inspector = sa.inspect(conn)
    names = set(inspector.get_table_names())
    problems = []
    for table in SQLModel.metadata.sorted_tables:
        if table.name not in names:
            problems.append(f"table '{table.name}' is missing")
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        lacking = [c.name for c in table.columns if c.name not in have]
        if lacking:
            problems.append(f"table '{table.name}' lacks column(s) {', '.join(lacking)}")
    return problems


def _pragma_lines(conn: sa.Connection, pragma: str) -> list[str]:
    """What SQLite's ``pragma`` check reports ([] for ok); raises sa.exc.DatabaseError when the
    file is too damaged for the check to walk."""
    rows = [str(r[0]) for r in conn.exec_driver_sql(f"PRAGMA {pragma}(20)").fetchall()]
    if rows == ["ok"]:
        return []
    return [line.strip() for row in rows for line in row.splitlines()
            if line.strip() and not line.startswith("***")][:20]


def integrity_problems(conn: sa.Connection, *, thorough: bool = False) -> list[str]:
    """SQLite's own check of the file (``quick_check``: pages and records, about 1 s a GB;
    ``integrity_check`` with ``thorough``: indexes too); nothing to check for a server."""
    if conn.dialect.name != "sqlite":
        return []
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        lines = _pragma_lines(conn, pragma)
    except sa.exc.DatabaseError as exc:  # too damaged for the check to walk it
        lines, error = [], exc
        if thorough:  # the full check stops at an index page it cannot read; quick_check lists them
            try:
                lines = _pragma_lines(conn, "quick_check")
            except sa.exc.DatabaseError:
                pass
            pragma = "quick_check" if lines else pragma
        lines = lines or [str(error.orig or error)]
    return [f"the database file is damaged ({pragma}): {line}" for line in lines]


def migrate(conn: sa.Connection) -> list[int]:
    """Apply the migrations ``conn``'s store lacks, in order, inside the caller's transaction
    (which holds the write lock: two processes starting on a new store, one migrates). A store
    a newer version migrated, or a SQLite file of another application, is refused before
    anything is written."""
    check_ours(conn)
    check_version(applied(conn))
    SQLModel.metadata.create_all(conn, tables=[MigrationRow.__table__])
    done = {r[0] for r in conn.execute(sa.select(MigrationRow.__table__.c.id))}
    applied_now = []
    for number, name, apply in MIGRATIONS:
        if number in done:
            continue
        apply(conn)
        conn.execute(sa.insert(MigrationRow.__table__).values(
            id=number, name=name, applied_at=time.time()))
        applied_now.append(number)
    return applied_now
