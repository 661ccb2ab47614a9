"""An answered call and its cache entry are committed at the end of the event loop's turn that
received it (within the store's ``answer_window``, when one is set, as a run sets it), with the
other answers received meanwhile in one transaction; this store finds them meanwhile, a flush
commits them first, and a failed commit keeps them for the next one."""

from __future__ import annotations

import asyncio
import os
import sqlite3

import pytest

from intellagent.runner import ANSWER_WINDOW
from intellagent.store import Store


def _answer(store: Store, run: str, i: int) -> None:
    store.record_answer(dict(run_id=run, stage="dialogs", role="user", model="m", provider="openai",
                             request_hash=f"h{i}", kind="chat", attempts=1, outcome="ok",
                             prompt_tokens=10, completion_tokens=2, cost_usd=0.001),
                        cache=dict(request_hash=f"h{i}", model="m", kind="chat", response=f'"a{i}"',
                                   prompt_tokens=10, completion_tokens=2))


def _committed(tmp_path) -> tuple[int, int]:
    """Call rows and cache entries another connection sees (what a kill would leave)."""
    other = sqlite3.connect(tmp_path / "intellagent.db")
    try:
        return (other.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0],
                other.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])
    finally:
        other.close()


def _count_commits(store: Store, monkeypatch) -> list[int]:
    commits: list[int] = []
    write = store._hot.write

    def counted(*args, **kwargs):
        commits.append(1)
        return write(*args, **kwargs)

    monkeypatch.setattr(store._hot, "write", counted)
    return commits


def test_the_answers_of_one_loop_turn_are_committed_together_at_its_end(tmp_path, monkeypatch):
    store = Store.for_workspace(tmp_path)
    run = store.start_run()
    commits = _count_commits(store, monkeypatch)

    async def turn():
        for i in range(3):
            _answer(store, run, i)
        during = _committed(tmp_path)
        found = store.cached("h1")  # this store finds an answer of this turn
        await asyncio.sleep(0)  # the turn ends
        return during, found, _committed(tmp_path)

    during, found, after = asyncio.run(turn())
    assert during == (0, 0) and found is not None and found.response == '"a1"'
    assert after == (3, 3) and len(commits) == 1
    _answer(store, run, 3)  # outside an event loop: at once
    assert _committed(tmp_path) == (4, 4) and len(commits) == 2


def test_within_a_window_the_answers_of_its_turns_are_committed_together_at_its_end(tmp_path, monkeypatch):
    store = Store.for_workspace(tmp_path)
    store.answer_window = window = ANSWER_WINDOW  # as a run's steps have it
    run = store.start_run()
    commits = _count_commits(store, monkeypatch)

    async def answers():
        _answer(store, run, 0)
        await asyncio.sleep(0)  # other turns of the loop: still within the window
        _answer(store, run, 1)
        await asyncio.sleep(window / 5)
        _answer(store, run, 2)
        during = _committed(tmp_path)
        found = store.cached("h1")  # this store finds an answer not committed yet
        await asyncio.sleep(window * 3)  # the window has ended
        after = _committed(tmp_path), len(commits)
        _answer(store, run, 3)  # a new window
        await asyncio.sleep(window * 3)
        return during, found, after, (_committed(tmp_path), len(commits))

    during, found, after, later = asyncio.run(answers())
    assert during == (0, 0) and found is not None and found.response == '"a1"'
    assert after == ((3, 3), 1)  # one commit for the three
    assert later == ((4, 4), 2)
    _answer(store, run, 4)  # outside an event loop: at once
    assert _committed(tmp_path) == (5, 5) and len(commits) == 3


def test_a_flush_in_the_same_turn_commits_the_answers_before_the_items(tmp_path):
    store = Store.for_workspace(tmp_path)
    run = store.start_run()

    async def turn():
        _answer(store, run, 0)
        store.flush()  # (a finished item's rows: never in the store before its calls)
        return _committed(tmp_path)

    assert asyncio.run(turn()) == (1, 1)


def test_a_commit_that_fails_keeps_the_answers_and_the_next_one_commits_them(tmp_path):
    store = Store.for_workspace(tmp_path)
    run = store.start_run()
    store._hot.conn().execute("PRAGMA busy_timeout = 50")
    locker = sqlite3.connect(tmp_path / "intellagent.db", isolation_level=None)

    async def turn():
        locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        _answer(store, run, 0)
        _answer(store, run, 1)
        await asyncio.sleep(0)  # the turn's commit fails: database is locked
        kept = len(store._answers), store.cached("h0") is not None
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.flush()  # a flush says so
        locker.execute("ROLLBACK")
        _answer(store, run, 2)
        await asyncio.sleep(0)
        return kept

    assert asyncio.run(turn()) == (2, True)
    locker.close()
    assert _committed(tmp_path) == (3, 3) and not store._answers


def test_remembered_results_are_committed_with_the_next_flush_and_found_meanwhile(tmp_path, monkeypatch):
    """A step's partial results (``StepContext.remember``: a graph's edge scores, hundreds of
    them) are buffered like items: one transaction for all of them, not one each."""
    store = Store.for_workspace(tmp_path)
    store.FLUSH_SECONDS = 3600  # (no flush falls due while the test runs)
    run = store.start_run()
    commits = _count_commits(store, monkeypatch)
    for i in range(3):
        store.put_artefact("memo", f"k{i}", str(i), run_id=run)
    store.put_artefact("memo", "k0", "99", run_id=run)  # one already remembered is left as it is
    assert [store.artefact("memo", f"k{i}") for i in range(4)] == ["0", "1", "2", None]
    assert _remembered(tmp_path) == [] and not commits
    store.flush()
    assert _remembered(tmp_path) == [("k0", "0"), ("k1", "1"), ("k2", "2")] and len(commits) == 1
    store.put_artefact("memo", "k1", "99", run_id=run)  # committed already: still left as it is
    assert store.artefact("memo", "k1") == "1"
    store.flush()
    assert store.artefact("memo", "k1") == "1" and _remembered(tmp_path)[1] == ("k1", "1")


def _remembered(tmp_path) -> list[tuple[str, str]]:
    other = sqlite3.connect(tmp_path / "intellagent.db")
    try:
        return other.execute("SELECT key, payload FROM artefacts ORDER BY key").fetchall()
    finally:
        other.close()


def test_a_runs_steps_commit_answers_within_its_window_and_all_of_them_as_they_end(tmp_path, monkeypatch):
    from intellagent.environment import load_environment
    from intellagent.plan import load_plan
    from intellagent.registry import load_registry
    from intellagent.runner import drive, run_plan
    from intellagent.store.calls import CallLog

    windows: list[float] = []
    record = CallLog.record_answer

    def spied(self, call, **kwargs):  # (what the store is set to as each answer comes)
        windows.append(self.answer_window)
        return record(self, call, **kwargs)

    monkeypatch.setattr(CallLog, "record_answer", spied)
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    plan = load_plan(None, registry, overrides=[("llm.default", {"model": "mock/demo"}, "test")],
                     params={"events": "3"})
    store = Store.for_workspace(tmp_path)
    drive(run_plan(plan, env, store=store, registry=registry, workspace=tmp_path,
                   progress_stream=open(os.devnull, "w")))
    assert len(windows) > 10 and set(windows) == {ANSWER_WINDOW}
    assert store.answer_window == 0 and not store._answers  # as it was, nothing left waiting
    other = sqlite3.connect(tmp_path / "intellagent.db")
    try:
        assert other.execute("SELECT COUNT(*) FROM llm_calls WHERE NOT cached").fetchone()[0] == len(windows)
    finally:
        other.close()
