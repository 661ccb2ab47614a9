"""The store's kept connection: a forked child opens its own, and statements get their values in
their placeholders' order."""

from __future__ import annotations

import os

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
