"""Reading an environment folder into an :class:`Environment`, and proving its parts agree."""

from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from intellagent.bounds import MAX_CHARS
from intellagent.environment.checks import RuleCheck, collect_checks
from intellagent.environment.database import Database, RowError
from intellagent.environment.dbschema import DatabaseSchema
from intellagent.environment.manifest import EnvironmentManifest
from intellagent.environment.refs import ReferenceError_, load_module, resolve
from intellagent.environment.seed import find_seed_file, read_seed, seed_table
from intellagent.environment.tools import Tool, ToolsFile, ToolSpec, bind_tool
from intellagent.environment.validators import (Validator, collect_validators, signature_problem,
                                                validate_database)
from intellagent.errors import EnvironmentError_, IntellagentError
from intellagent.paths import inside
from intellagent.yamlio import line_of, load_model, read_yaml, validate_data

MANIFEST = "environment.yaml"
MAX_PROBLEMS = 20
POOL_BYTES = 64 * 2**20
"""Most bytes of idle seed copies an environment keeps to lend (:meth:`Environment.lent_database`)."""
LEND_TIMES = 8
"""How many blocks a copy of the seed is lent for before it is closed (and a new one made): its
connection's memory grows with use. At 8, a 1,600-event run over HTTP peaked at 247–250 MiB
(fresh copies: 240 MiB; lent without end: 263 MiB) and made a copy for one block in eight."""


class Row(BaseModel):
    """One record to put into a database: its table, key and fields."""

    table: str
    key: str
    record: dict[str, Any]


class Environment(BaseModel):
    """A loaded environment: prompt, database schema and seed, tools, validators."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    version: str
    description: str
    path: Path
    prompt: str
    task: str | None = None
    db_schema: DatabaseSchema | None = None
    tool_specs: list[ToolSpec] = []
    seed_files: dict[str, Path] = {}
    prompt_file: Path | None = None
    tool_timeout: float = 30.0
    seed_loader: str | None = Field(default=None, description="'file.py:function' giving the seed rows.")

    _tools: dict[str, Tool] = PrivateAttr(default_factory=dict)
    _validators: list[Validator] = PrivateAttr(default_factory=list)
    _checks: list[RuleCheck] = PrivateAttr(default_factory=list)
    _problems: list[IntellagentError] = PrivateAttr(default_factory=list)
    _seed_db: Database | None = PrivateAttr(default=None)
    _seed_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _pool: list[tuple[Database, int]] = PrivateAttr(default_factory=list)  # idle copies of the seed, blocks served
    _pool_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _seed_bytes: int | None = PrivateAttr(default=None)
    _fingerprint: str | None = PrivateAttr(default=None)
    _loaded: dict[str, dict[str, Any]] | None = PrivateAttr(default=None)
    _source: dict[str, Any] = PrivateAttr(default_factory=dict)  # load_environment's arguments

    @property
    def tools(self) -> dict[str, Tool]:
        return self._tools

    @property
    def validators(self) -> list[Validator]:
        return self._validators

    @property
    def checks(self) -> list[RuleCheck]:
        """The rule checks the environment declares (``checks:`` in its manifest)."""
        return self._checks

    @property
    def problems(self) -> list[IntellagentError]:
        """What loading found wrong with tools and validators (empty for a strict load)."""
        return self._problems

    def seed_database(self) -> Database:
        """A fresh copy of the database holding the seed rows (built once, then copied)."""
        if self.db_schema is None:
            raise EnvironmentError_(f"environment '{self.name}' has no database")
        self.prepare()
        assert self._seed_db is not None
        return self._seed_db.copy()

    @contextmanager
    def lent_database(self, rows: Iterable[Row] = ()) -> Iterator[Database | None]:
        """A copy of the seed database with ``rows`` put on top, lent for the block (None without
        a database): every write to it is undone when the block ends, and the copy is lent
        again. A lent copy is quicker than a new one by more than the copy: SQLite reads a new
        connection's schema at its first statement (0.1 ms for airline's, with its triggers) and
        prepares each statement anew, and closing one frees its pages; a lent one has its schema
        read and its statements prepared. A copy closed inside the block (:meth:`Database.close`:
        a tool call that may still use it) is not lent again; nor is one the undoing could not
        bring back to the seed (a write that outlived it: a tool's own COMMIT)."""
        if self.db_schema is None:
            yield None
            return
        db, lent = self._idle_copy()
        try:
            with db.undone():
                if rows:
                    self._put_rows(db, rows)
                yield db
        finally:
            self._give_back(db, lent + 1)

    def _idle_copy(self) -> tuple[Database, int]:
        """An idle copy and how many blocks it served, or a new copy."""
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        return self.seed_database(), 0

    def _give_back(self, db: Database, lent: int) -> None:
        if db.closing:
            return
        # a copy not the seed's any more, or lent LEND_TIMES (SQLite's memory for a connection
        # grows with its use, and undoing its writes does not give it all back)
        if lent >= LEND_TIMES or db.versions() != db.base_versions():
            db.close()
            return
        with self._pool_lock:
            if len(self._pool) < self._pool_size():
                self._pool.append((db, lent))
                return
        db.close()

    def _pool_size(self) -> int:
        """How many idle copies the pool keeps: as many as fit in ``POOL_BYTES``, at least one."""
        if self._seed_bytes is None:
            assert self._seed_db is not None
            self._seed_bytes = self._seed_db.size()  # (the seed is never written)
        return max(1, POOL_BYTES // max(1, self._seed_bytes))

    def seed_view(self) -> Database:
        """The seed database that :meth:`seed_database` copies, to read from without a copy of
        one's own (0.7 MB for airline's seed, held through the model calls of each event in
        flight): never to be written to or closed."""
        if self.db_schema is None:
            raise EnvironmentError_(f"environment '{self.name}' has no database")
        self.prepare()
        assert self._seed_db is not None
        return self._seed_db

    def prepare(self) -> None:
        """Build the seed database now if the environment has one (what :meth:`seed_database`
        copies). Safe from another thread: a run starts it in one while its first model calls
        are in flight, and a first copy waits for it."""
        if self.db_schema is None or self._seed_db is not None:
            return
        with self._seed_lock:
            if self._seed_db is None:
                db, problems = build_seed_database(self)
                if problems:
                    raise problems[0]
                self._install_seed(db)

    def _install_seed(self, db: Database) -> None:
        """Keep ``db``, a faultless build of the seed, as the one copies are made from (the
        caller holds the lock, or no run has started)."""
        db.hash()  # its tables' hash texts cached: a copy's hash reads only the rows it wrote
        db.freeze()  # read through seed_view, copied, never written
        self._seed_db = db

    def loaded_seed(self) -> dict[str, dict[str, Any]]:
        """The rows the environment's seed loader returns ({table: {key: record}})."""
        if self._loaded is None:
            try:
                fn = resolve(self.seed_loader, self.path)
                data = fn()
            except ReferenceError_ as exc:
                raise EnvironmentError_(f"seed loader: {exc}", file=self.path / MANIFEST) from None
            except IntellagentError:
                raise
            except Exception as exc:
                raise EnvironmentError_(f"seed loader {self.seed_loader} failed: {type(exc).__name__}: "
                                        f"{exc}", file=self.path / MANIFEST) from None
            shape = f"seed loader {self.seed_loader} must return {{table: {{key: record}}}}"
            if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
                raise EnvironmentError_(shape, file=self.path / MANIFEST)
            for table, rows in data.items():
                if self.db_schema is not None and table not in self.db_schema.tables:
                    raise EnvironmentError_(f"seed loader {self.seed_loader} gives rows for a table the "
                                            f"schema lacks: '{table}' (tables: "
                                            f"{', '.join(self.db_schema.tables)})", file=self.path / MANIFEST)
                odd = next((k for k, r in rows.items() if not isinstance(r, dict)), None)
                if odd is not None:
                    raise EnvironmentError_(f"{shape}: {table}[{odd!r}] is a {type(rows[odd]).__name__}",
                                            file=self.path / MANIFEST)
            self._loaded = data
        return self._loaded

    def database_with(self, rows: Iterable[Row] = ()) -> Database | None:
        """A fresh copy of the seed database with ``rows`` put on top (None without a database)."""
        if self.db_schema is None:
            return None
        db = self.seed_database()
        self._put_rows(db, rows)
        return db

    def _put_rows(self, db: Database, rows: Iterable[Row]) -> None:
        assert self.db_schema is not None
        order = {t: i for i, t in enumerate(self.db_schema.load_order())}
        with db.transaction():  # referenced tables first, so new rows may refer to each other
            for row in sorted(rows, key=lambda r: order.get(r.table, len(order))):
                db.put(row.table, row.key, row.record)

    def fingerprint(self) -> str:
        """A hash of every file the environment is made of (manifest, prompt, schema, tools and
        their code, validators, seed data): a cached result is reused only for the same world."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            files = {p for p in self.path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                     and p.suffix not in (".pyc", ".pyo")}
            files |= set(self.seed_files.values()) | ({self.prompt_file} if self.prompt_file else set())
            for path in sorted(files):
                digest.update(str(path.relative_to(self.path) if path.is_relative_to(self.path)
                                  else path.name).encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            if self.seed_loader:  # data read at run time: its content is part of the world
                digest.update(json.dumps(self.loaded_seed(), sort_keys=True, default=str).encode())
            self._fingerprint = digest.hexdigest()
        return self._fingerprint


def _file(base: Path, rel: str, what: str, manifest: Path, line: int | None = None) -> Path:
    """The file ``rel`` names inside the environment folder ``base`` (symbolic links followed)."""
    path = inside(base, rel)
    if path is None:
        raise EnvironmentError_(f"{what} '{rel}' points outside the environment folder", file=manifest,
                                line=line)
    if not path.exists():
        raise EnvironmentError_(f"{what} file '{rel}' not found", file=manifest, line=line)
    return path


def _text(path: Path, what: str) -> str:
    """The text of a Markdown part; an empty one is refused (an agent with no prompt tests nothing:
    no policy to break, every event passes)."""
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise EnvironmentError_(f"the {what} is a folder, expected a Markdown file", file=path) from None
    except UnicodeDecodeError as exc:
        raise EnvironmentError_(f"the {what} is not UTF-8 text (byte {exc.start}: {exc.reason})",
                                file=path) from None
    if not text.strip():
        raise EnvironmentError_(f"the {what} is empty", file=path)
    if len(text) > MAX_CHARS:  # it is sent with every request the agent makes
        raise EnvironmentError_(f"the {what} is {len(text):,} characters, past the bound of {MAX_CHARS:,}",
                                file=path)
    return text


def load_environment(path: str | Path, *, data: str | Path | None = None,
                     prompt: str | Path | None = None, strict: bool = True) -> Environment:
    """Load the environment folder ``path`` (or its ``environment.yaml``).

    ``data`` replaces the seed folder (e.g. to load τ-bench's own data), ``prompt`` the agent's
    prompt file (e.g. τ-bench's own policy text). With ``strict``, the
    first problem binding tools or validators is raised; otherwise they are kept in
    ``Environment.problems`` for ``validate`` to list.
    """
    source = {"path": str(path), "data": str(data) if data is not None else None,
              "prompt": str(prompt) if prompt is not None else None}
    path = Path(path)
    folder = path.parent if path.name == MANIFEST else path
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        raise EnvironmentError_("environment folder not found", file=folder)
    if not manifest_path.is_file():
        # a project folder made by `new-env` holds its environment a few levels down
        inside = [p for depth in ("*", "*/*", "*/*/*") for p in sorted(folder.glob(f"{depth}/{MANIFEST}"))
                  if ".venv" not in p.parts and "site-packages" not in p.parts]
        hint = (f" (it holds {inside[0].parent}: give that folder, or `pip install -e {folder}` and use "
                "the environment's name)") if inside else ""
        raise EnvironmentError_(f"no {MANIFEST} in this folder{hint}", file=folder)
    raw_manifest = read_yaml(manifest_path)
    if raw_manifest is None:
        raise EnvironmentError_("file is empty", file=manifest_path)
    manifest = validate_data(EnvironmentManifest, raw_manifest, manifest_path)

    def at(*loc: Any) -> int | None:  # the manifest's line for a key
        return line_of(raw_manifest, loc)

    if prompt is not None:
        prompt_path = Path(prompt)
        if not prompt_path.is_file():
            raise EnvironmentError_("prompt file not found", file=prompt_path)
    else:
        prompt_path = _file(folder, manifest.prompt, "prompt", manifest_path, at("prompt"))
    prompt = _text(prompt_path, "prompt")
    task = _text(_file(folder, manifest.task, "task", manifest_path, at("task")), "task") \
        if manifest.task else None

    schema = None
    seed_files: dict[str, Path] = {}
    if data is not None and manifest.database is None:
        raise EnvironmentError_(f"--data given, but environment '{manifest.name}' has no database",
                                file=manifest_path, line=at("database"))
    if manifest.database is not None:
        schema_path = _file(folder, manifest.database.schema_file, "database schema", manifest_path,
                            at("database", "schema"))
        schema = load_model(DatabaseSchema, schema_path)
        seed_files = _seed_files(folder, manifest, schema, manifest_path, data, at)
        if manifest.database.loader and data is not None:
            raise EnvironmentError_("--data cannot replace the rows of an environment whose seed "
                                    "comes from a loader", file=manifest_path,
                                    line=at("database", "loader"))

    env = Environment(name=manifest.name, version=manifest.version, description=manifest.description,
                      tool_timeout=manifest.tool_timeout,
                      path=folder.resolve(), prompt=prompt, task=task, db_schema=schema,
                      seed_files=seed_files, prompt_file=prompt_path.resolve(),
                      seed_loader=manifest.database.loader if manifest.database else None)

    if manifest.tools:
        tools_path = _file(folder, manifest.tools, "tools", manifest_path, at("tools"))
        raw = read_yaml(tools_path)
        tools_file = validate_data(ToolsFile, raw, tools_path)
        seen: set[str] = set()
        for i, spec in enumerate(tools_file.tools):
            line = line_of(raw, ("tools", i, "implementation")) or line_of(raw, ("tools", i))
            spec._source = f"{tools_path}:{line}"
            if spec.name in seen:
                env._problems.append(EnvironmentError_(f"tool '{spec.name}' is declared twice",
                                                       file=tools_path, line=line))
                continue
            seen.add(spec.name)
            tool, problems = bind_tool(spec, folder)
            for problem in problems:
                if "failed to import" in problem:  # say it once, not once per tool of the module
                    problem = problem.split(": implementation ", 1)[-1]
                    if any(problem in p.message for p in env._problems):
                        continue
                env._problems.append(EnvironmentError_(problem, file=tools_path, line=line))
            if tool is not None:
                env._tools[spec.name] = tool
        env.tool_specs = tools_file.tools
        if any(s.action for s in tools_file.tools) and schema is None:
            env._problems.append(EnvironmentError_(
                "tools change state ('action: true') but the environment has no database",
                file=tools_path))

    if manifest.validators:
        try:
            module = load_module(manifest.validators, folder)
        except ReferenceError_ as exc:
            env._problems.append(EnvironmentError_(f"validators: {exc}", file=manifest_path,
                                                   line=at("validators")))
        else:
            validators = collect_validators(module)
            if not validators:
                env._problems.append(EnvironmentError_(
                    f"validators: '{manifest.validators}' holds no function marked @row_validator or "
                    "@database_validator", file=manifest_path, line=at("validators")))
            for v in validators:  # one that cannot be called is reported here, not once per row
                problem = signature_problem(v)
                if problem:
                    env._problems.append(EnvironmentError_(problem, file=manifest_path, line=at("validators")))
                else:
                    env._validators.append(v)
            if schema is not None:
                for v in env._validators:
                    if v.kind == "row" and v.table not in schema.tables:
                        env._problems.append(EnvironmentError_(
                            f"validator {v.name} is for unknown table '{v.table}'",
                            file=manifest_path, line=at("validators")))

    if manifest.checks:
        try:
            module = load_module(manifest.checks, folder)
        except ReferenceError_ as exc:
            env._problems.append(EnvironmentError_(f"checks: {exc}", file=manifest_path,
                                                   line=at("checks")))
        else:
            env._checks, problems = collect_checks(module)
            env._problems.extend(EnvironmentError_(p, file=manifest_path, line=at("checks"))
                                 for p in problems)
            if not env._checks and not problems:
                env._problems.append(EnvironmentError_(f"checks: '{manifest.checks}' holds no "
                                                       "function marked @rule_check",
                                                       file=manifest_path, line=at("checks")))

    if strict and env._problems:
        raise env._problems[0]
    env._source = source
    return env


def _seed_files(folder: Path, manifest: EnvironmentManifest, schema: DatabaseSchema,
                manifest_path: Path, data: str | Path | None,
                at: Callable[..., int | None]) -> dict[str, Path]:
    """The seed file of each table: from the manifest's mapping, its seed folder, or ``--data``.
    A folder holds one file per table (``<table>.json``, ``.jsonl``, ``.csv``, optionally
    gzipped); one holding none, or in the environment's own folder a file for a table the schema
    lacks, is refused. A ``--data`` folder may hold other files beside its tables' (τ-bench keeps
    its task files there), unless a table has no file: then the stray file is likely its own."""
    seed = manifest.database.seed if manifest.database else None
    where: Path = manifest_path
    line = at("database", "seed")
    if data is not None:
        where, line = Path(data), None
        seed = str(Path(data).resolve())
        if not Path(seed).is_dir():
            raise EnvironmentError_("data folder not found", file=data)
    if seed is None:
        return {}
    if isinstance(seed, dict):
        unknown = [t for t in seed if t not in schema.tables]
        if unknown:
            raise EnvironmentError_(f"seed names unknown table '{unknown[0]}' (tables: "
                                    f"{', '.join(schema.tables)})", file=manifest_path,
                                    line=at("database", "seed", unknown[0]))
        return {t: _file(folder, f, f"seed for '{t}'", manifest_path, at("database", "seed", t))
                for t, f in seed.items()}
    seed_dir = inside(folder, seed) if data is None else Path(seed)
    if seed_dir is None:
        raise EnvironmentError_(f"seed folder '{seed}' points outside the environment folder",
                                file=manifest_path, line=line)
    if not seed_dir.is_dir():
        raise EnvironmentError_(f"seed folder '{seed}' not found", file=manifest_path, line=line)
    found = {}
    for table in schema.tables:
        f = find_seed_file(seed_dir, table)
        if f is not None and data is None and inside(folder, f) is None:  # a link to elsewhere
            raise EnvironmentError_("seed file points outside the environment folder", file=f)
        if f is not None:
            found[table] = f
    what = "data folder" if data is not None else f"seed folder '{seed}'"
    if not found:
        raise EnvironmentError_(f"{what} holds no seed file for any table (expected "
                                + ", ".join(f"{t}.json" for t in schema.tables) + ", or .jsonl/.csv/.gz)",
                                file=where, line=line)
    strays = [p for p in sorted(seed_dir.iterdir()) if p.is_file() and seed_table(p) is not None
              and seed_table(p) not in schema.tables]
    missing = [t for t in schema.tables if t not in found]
    if strays and (data is None or missing):
        lacking = f"; no file for {', '.join(missing)}" if missing else ""
        raise EnvironmentError_(f"seed file for a table the schema lacks: '{seed_table(strays[0])}' "
                                f"(tables: {', '.join(schema.tables)}{lacking})", file=strays[0])
    return found


def build_seed_database(env: Environment, *, limit: int = MAX_PROBLEMS
                        ) -> tuple[Database, list[IntellagentError]]:
    """The seed rows in a new database, with every row that did not fit reported (and skipped)."""
    assert env.db_schema is not None
    db = Database.empty(env.db_schema)
    problems: list[IntellagentError] = []
    rejected: set[tuple[str, str]] = set()  # rows already reported; rows citing them are not
    unreadable: set[str] = set()  # tables whose file failed; rows citing them are not reported
    loaded = env.loaded_seed() if env.seed_loader else None
    for table in env.db_schema.load_order():
        path = env.seed_files.get(table)
        if loaded is not None:
            path = env.path / MANIFEST
            rows = [(str(k), r, f"{table}[{k}]") for k, r in loaded.get(table, {}).items()]
        elif path is None:
            continue
        try:
            rows = rows if loaded is not None else read_seed(path, table, env.db_schema.tables[table])
        except IntellagentError as exc:
            problems.append(exc)
            unreadable.add(table)
            continue
        with db.transaction():
            for key, record, where in rows:
                try:
                    with db.transaction():
                        db.insert(table, record, key=key)
                except RowError as exc:
                    rejected.add((table, key))
                    ref = exc.missing_reference
                    if ref is not None and (ref in rejected or ref[0] in unreadable):
                        continue
                    message = str(exc).split(": ", 1)[-1]
                    problems.append(EnvironmentError_(message, file=path, item=where))
                    if len(problems) >= limit:
                        return db, problems
    return db, problems


def check_environment(env: Environment) -> list[IntellagentError]:
    """Everything wrong with ``env``: tool bindings, seed rows, validators over the seed."""
    problems = list(env.problems)
    if env.db_schema is not None:
        db, seed_problems = build_seed_database(env)
        problems.extend(seed_problems)
        if seed_problems:
            db.close()
        else:
            with env._seed_lock:  # a run that follows copies this build instead of making its own
                if env._seed_db is None:
                    env._install_seed(db)
                else:
                    db.close()
            if env.validators:
                where = next(iter(env.seed_files.values()), env.path)
                db = env.seed_database()  # validators see a copy: the seed stays as built
                for complaint in validate_database(db, env.validators, limit=MAX_PROBLEMS):
                    problems.append(EnvironmentError_(f"validator: {complaint}", file=where.parent
                                                      if where != env.path else where))
                db.close()
    return problems[:MAX_PROBLEMS]
