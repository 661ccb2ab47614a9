"""The store's kept connection: a forked child opens its own, and statements get their values in
their placeholders' order."""

from __future__ import annotations

import os
import time

import pytest

from intellagent.store import Store


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a platform that forks")
def test_a_forked_child_does_not_use_its_parents_kept_connection(tmp_path):
    store = Store.for_workspace(tmp_path)
    parent = store._hot.conn()
    assert store._hot.conn() is parent  # kept
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, kept in turn
        try:
            mine = store._hot.conn()
            ok = mine is not parent and store._hot.conn() is mine and store._hot._pid == os.getpid()
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert store._hot.conn() is parent  # the parent's own is still its own


def test_answers_written_through_the_kept_connection_read_back_as_written(tmp_path):
    """A call row has twenty-odd columns, put in their placeholders' order by one getter per
    column order; a cache entry is read back by its one key."""
    store = Store.for_workspace(tmp_path)
    run = store.start_run()
    for i, outcome in enumerate(["ok", "infra-error"]):
        store.record_answer(dict(run_id=run, stage="dialogs", role=f"role{i}", model=f"m{i}", provider="openai",
                                 request_hash=f"h{i}", kind="chat", attempts=i + 1, prompt_tokens=10 * (i + 1),
                                 completion_tokens=3 + i, latency_ms=5.5 * (i + 1), cost_usd=0.25 * i,
                                 outcome=outcome, item_key=f"k{i}"),
                            cache={"request_hash": f"h{i}", "model": f"m{i}", "kind": "chat",
                                   "response": f'{{"n": {i}}}', "prompt_tokens": 7 + i, "completion_tokens": 1})
    rows = store.calls(run)
    assert [(r.role, r.model, r.request_hash, r.attempts, r.prompt_tokens, r.completion_tokens,
             r.latency_ms, r.cost_usd, r.outcome, r.item_key) for r in rows] == [
        ("role0", "m0", "h0", 1, 10, 3, 5.5, 0.0, "ok", "k0"),
        ("role1", "m1", "h1", 2, 20, 4, 11.0, 0.25, "infra-error", "k1")]
    cached = store.cached("h1")
    assert (cached.model, cached.response, cached.prompt_tokens) == ("m1", '{"n": 1}', 8)
    assert store.failed_attempts() == {"h1": 2}


def _item_columns(store: Store) -> list[str]:
    return [row[1] for row in store._hot.conn().execute("PRAGMA table_info(items)")]


def _put_and_read(store: Store, run: str, n: int) -> list[tuple]:
    big = '{"turns": "' + "x" * 20_000 + '"}'  # a value that spills into overflow pages
    for i in range(n):
        store.put_item(key=f"k{i}", step="s", status="ok", halt=bool(i % 2), note=f"n{i}",
                       scores="[]", payload=big, value_hash=f"v{i}", warnings='["w"]', run_id=run)
        store.record_run_item(run, "s", f"E{i}", f"{i:04d}", f"k{i}", "ok")
    store.flush()
    found = store.item("k1")
    assert (found.payload, found.value_hash, found.run_id, found.note) == (big, "v1", run, "n1")
    return [(r["item"], r["halt"], r["note"], r["value_hash"], r["warnings"], r.get("payload") == big)
            for r in store.run_items(run, payload=True)]


def test_an_items_value_is_its_rows_last_column_and_a_store_made_before_reads_the_same(tmp_path):
    """A long value spills into overflow pages, which a read of any column after it walks: a new
    store keeps it last, so the report's passes over the items (every column but the value) read
    none of them. A store made with the value before value_hash, created_at and run_id reads and
    writes the same rows."""
    new = Store.for_workspace(tmp_path / "new")
    assert _item_columns(new)[-1] == "payload"
    expected = _put_and_read(new, new.start_run(), 3)
    assert expected == [(f"E{i}", bool(i % 2), f"n{i}", f"v{i}", '["w"]', True) for i in range(3)]

    old = Store.for_workspace(tmp_path / "old")
    conn = old._hot.conn()
    columns = _item_columns(old)
    before = columns[:columns.index("value_hash")] + ["payload", "value_hash", "created_at", "run_id"]
    ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'items'").fetchone()[0]
    lines = {line.strip().split()[0].strip('"'): line.strip().rstrip(",")
             for line in ddl.splitlines()[1:] if line.strip() and not line.strip().startswith(("PRIMARY", ")"))}
    conn.execute("DROP TABLE items")
    conn.execute("CREATE TABLE items (" + ", ".join(lines[c] for c in before) + ', PRIMARY KEY ("key"))')
    assert _item_columns(old) == before and before != columns
    assert _put_and_read(old, old.start_run(), 3) == expected


def test_a_store_being_made_by_another_process_is_waited_for_not_refused(tmp_path):
    # two runs started together on a new workspace: while one switches the new file to WAL it
    # holds a write lock on it in rollback mode, and SQLite answers the other's switch with
    # "database is locked" at once, without its busy timeout (a lock it could deadlock on)
    import sqlite3
    import threading

    path = tmp_path / "intellagent.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the other process's switch, caught in the middle
    threading.Timer(0.3, other.rollback).start()
    started = time.monotonic()
    store = Store(f"sqlite:///{path}")
    assert time.monotonic() - started >= 0.3  # waited for the lock, then made the store
    assert store.problems() == []
    assert store.describe().startswith("schema at migration")
    other.close()
