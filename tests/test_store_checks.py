"""A store is checked when it is opened, before any work: one a newer IntellAgent migrated is
refused naming both schema versions, one with a table dropped or damaged pages is refused in one
line (not an internal error after the run's work); ``intellagent store check`` lists every
problem; the commands that only read runs (report, compare, cost) open it read-only, so they
work on a store they may not write (a read-only workspace, a store another process is writing)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from intellagent import __version__
from intellagent.cli import cli
from intellagent.store import Store
from intellagent.store.schema import SCHEMA
from tests.test_bad_input import assert_one_clean_line


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A workspace with two finished runs (made once; each test works on a copy)."""
    from click.testing import CliRunner

    ws = tmp_path_factory.mktemp("made") / "ws"
    for seed in ("1", "2"):
        result = CliRunner().invoke(cli, ["run", "education", "--events", "2", "--seed", seed, "--workspace", str(ws)])
        assert result.exit_code in (0, 3), result.output
    return ws


@pytest.fixture
def ws(made, tmp_path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(made, copy)
    return copy


def sql(ws: Path, *statements: str) -> None:
    with sqlite3.connect(ws / "intellagent.db") as conn:
        for statement in statements:
            conn.execute(statement)


def digest(ws: Path) -> str:
    """The store's content (every row of every table), however SQLite lays out its pages."""
    conn = sqlite3.connect(f"file:{ws / 'intellagent.db'}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


COMMANDS = [["run", "education", "--events", "2"], ["report"], ["cost"], ["compare", "latest"],
            ["store", "check"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_store_a_newer_version_migrated_is_refused_naming_both_versions(command, ws, runner):
    sql(ws, f"INSERT INTO migrations VALUES ({SCHEMA + 3}, 'a table of the future', 0)")
    runs_before = len(list((ws / "runs").iterdir()))
    before = digest(ws)
    result = runner.invoke(cli, [*command, "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", f"this store's schema is at migration {SCHEMA + 3} "
                          f"(a table of the future), newer than IntellAgent {__version__} knows "
                          f"(migrations 1-{SCHEMA})")
    assert digest(ws) == before and len(list((ws / "runs").iterdir())) == runs_before  # nothing written


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_store_with_a_table_dropped_is_refused_before_any_work(command, ws, runner):
    sql(ws, "DROP TABLE run_items")
    result = runner.invoke(cli, [*command, "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "table 'run_items' is missing")
    with sqlite3.connect(ws / "intellagent.db") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2  # no run started


def test_a_store_with_a_column_gone_is_refused(ws, runner):
    sql(ws, "ALTER TABLE items DROP COLUMN warnings")
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "table 'items' lacks column(s) warnings")


def damage(ws: Path) -> None:
    """Overwrite four whole pages a third into the file, as a disk or a copy gone wrong would
    (vacuumed first, so that they are pages in use: a damaged free page harms no data)."""
    with sqlite3.connect(ws / "intellagent.db") as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    path = ws / "intellagent.db"
    pages = path.stat().st_size // page_size
    with path.open("r+b") as fh:
        for page in range(pages // 3, pages // 3 + 4):
            fh.seek(page * page_size)
            fh.write(b"\xde\xad\xbe\xef" * (page_size // 4))


def test_a_store_with_damaged_pages_is_refused_in_one_line_and_store_check_lists_them(ws, runner):
    damage(ws)
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "the database file is damaged (quick_check): ")
    assert "internal error" not in result.output
    result = runner.invoke(cli, ["store", "check", "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "the database file is damaged (integrity_check): ",
                          lines_allowed=20)


def test_store_check_lists_every_damaged_index_page(ws, runner):
    """SQLite's full check stops at an index page it cannot read ('database disk image is
    malformed'); the pages quick_check finds are listed instead."""
    with sqlite3.connect(ws / "intellagent.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [row[0] for row in conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' "
                                                "AND tbl_name IN ('llm_calls', 'run_items')")]
    with (ws / "intellagent.db").open("r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * size)
            fh.write(b"\xde\xad\xbe\xef" * 256)
    result = runner.invoke(cli, ["store", "check", "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "the database file is damaged (quick_check): Page ",
                          lines_allowed=20)
    assert len(result.stderr.strip().splitlines()) == len(pages)


def test_store_check_says_what_a_sound_store_holds(ws, runner):
    result = runner.invoke(cli, ["store", "check", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(ws / "intellagent.db") as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("items", "llm_calls")]
    assert result.stdout.strip().endswith(f"intellagent.db: schema at migration {SCHEMA} of {SCHEMA}; "
                                          f"2 run(s), {counts[0]} item(s), {counts[1]} model call(s); "
                                          "integrity ok")
    result = runner.invoke(cli, ["store", "check", "--store", f"sqlite:///{ws / 'intellagent.db'}"])
    assert result.exit_code == 0 and result.stdout.startswith("ok: sqlite:///"), result.output
    assert_one_clean_line(runner.invoke(cli, ["store", "check", "--workspace", str(ws / "nope")]),
                          "ws/nope", "no intellagent.db here: not a workspace")


def test_reading_commands_never_write_the_store(ws, runner):
    """They open it read-only: they work while another process holds the write lock (a run
    writing to it), where a writable open would wait for the lock and fail, and they leave the
    file as it was."""
    holder = sqlite3.connect(ws / "intellagent.db", isolation_level=None)
    holder.execute("PRAGMA busy_timeout=0")
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held while the commands run
    try:
        before = digest(ws)
        started = time.monotonic()
        for command in (["cost"], ["compare", "latest"], ["report", "--format", "json"]):
            result = runner.invoke(cli, [*command, "--workspace", str(ws)])
            assert result.exit_code == 0, (command, result.output)
        assert time.monotonic() - started < 20  # none waited for the write lock
        assert digest(ws) == before
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with pytest.raises(Exception, match="readonly|read-only|query_only"):
        Store(f"sqlite:///{ws / 'intellagent.db'}", read_only=True).set_run_status("x", "done")


def test_a_store_that_needs_a_migration_is_migrated_by_a_writable_open(ws, runner):
    sql(ws, f"DELETE FROM migrations WHERE id = {SCHEMA}")
    result = runner.invoke(cli, ["cost", "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", f"needs migrations {SCHEMA}-{SCHEMA} of IntellAgent "
                          f"{__version__}, which a read-only open cannot apply: open it writable once "
                          "(intellagent store check)")
    assert runner.invoke(cli, ["store", "check", "--workspace", str(ws)]).exit_code == 0
    assert runner.invoke(cli, ["cost", "--workspace", str(ws)]).exit_code == 0


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_sqlite_file_of_another_application_is_refused_and_left_as_it_was(command, runner, tmp_path):
    """It was migrated: IntellAgent's tables written beside the other application's."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with sqlite3.connect(ws / "intellagent.db") as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    before = digest(ws)
    result = runner.invoke(cli, [*command, "--workspace", str(ws)])
    assert_one_clean_line(result, "ws/intellagent.db", "not an IntellAgent store: it holds another "
                          "application's tables (invoices)")
    assert digest(ws) == before
