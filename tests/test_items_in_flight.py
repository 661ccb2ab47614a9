"""A run holds the state of only the items it can work on (issue 31: memory over HTTP flat in the
number of events). Items wait for a model slot holding what they hold (a dialog its event
database, 0.7 MB for airline), so a fan-out keeps about one item per model slot in progress,
not twice as many: past that, a larger run keeps no more of them at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from intellagent.environment import Database, load_environment
from intellagent.executors import items_in_flight
from intellagent.plan import load_plan
from intellagent.registry import load_registry
from intellagent.runner import run_plan
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer

SLOTS = 8
EVENTS = 24  # more than twice the slots: the window fills


def test_a_run_keeps_about_one_event_database_per_model_slot_open(tmp_path, monkeypatch):
    """24 events over HTTP with 8 model slots: the databases open at once (the seed's, the
    dialogs' and any made for a moment) stay within the items a fan-out keeps in progress and
    a few; at twice the slots, 16 dialogs held theirs at once, half of them waiting."""
    open_now: set[int] = set()
    most = [0]
    made, close, dropped = Database.__init__, Database.close, Database.__del__

    def opened(self, *args, **kwargs):
        made(self, *args, **kwargs)
        open_now.add(id(self))
        most[0] = max(most[0], len(open_now))

    def closed(self):
        open_now.discard(id(self))
        close(self)

    def gone(self):  # dropped without close(): closed by __del__
        open_now.discard(id(self))
        dropped(self)

    monkeypatch.setattr(Database, "__init__", opened)
    monkeypatch.setattr(Database, "__del__", gone)
    monkeypatch.setattr(Database, "close", closed)
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    with OpenAIServer(latency=0.02, list_items=3) as server:
        plan = load_plan(None, registry, params={"events": str(EVENTS)}, overrides=[
            ("llm.default", {"model": "gpt-4o-mini", "base_url": server.base_url}, "test"),
            ("llm.max_concurrency", SLOTS, "test")])
        result = asyncio.run(run_plan(plan, env, store=Store.for_workspace(tmp_path), registry=registry,
                                      workspace=Path(tmp_path), progress_stream=open("/dev/null", "w")))
    assert sum(result.report.outcomes.values()) == EVENTS
    in_flight = items_in_flight(2 * SLOTS)
    assert in_flight < 2 * SLOTS
    assert most[0] <= in_flight + 2, f"{most[0]} databases open at once ({in_flight} items in flight)"
