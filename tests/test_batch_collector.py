"""A run leaves the objects that existed before it out of garbage collections, and puts them back
after; it collects with thresholds of its own, and gives the collector back the ones it had."""

from __future__ import annotations

import gc
import types

import pytest

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.runner import RUN_THRESHOLDS, batch_collector


@pytest.fixture
def interactive_collector():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_run_leaves_what_existed_before_it_out_of_collections(interactive_collector, runner, tmp_path):
    seen, thresholds = [], []
    plugin = types.ModuleType("gc_observer")
    plugin.before_step = hookimpl(lambda run, step: (seen.append(gc.get_freeze_count()),
                                                     thresholds.append(gc.get_threshold())))
    mine = (900, 9, 11)  # a process's own settings, not Python's
    before = gc.get_threshold()
    gc.set_threshold(*mine)
    try:
        result = runner.invoke(cli, ["run", "education", "--events", "3", "--workspace", str(tmp_path)],
                               obj={"plugins": (plugin,)})
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*before)
    assert result.exit_code == 0, result.output
    assert len(seen) == 5
    assert all(frozen > 1000 for frozen in seen)
    assert gc.get_freeze_count() == 0
    assert thresholds == [RUN_THRESHOLDS] * 5 and RUN_THRESHOLDS != mine
    assert after == mine


def test_a_failed_run_puts_the_collector_back_too(interactive_collector, runner, tmp_path):
    from tests.test_observers import run_broken_pipeline

    errors = []
    observer = types.ModuleType("gc_error_observer")
    observer.on_run_error = hookimpl(lambda run, error: errors.append(gc.get_freeze_count() > 1000))
    result = run_broken_pipeline(runner, tmp_path, observer)
    assert result.exit_code != 0
    assert errors == [True]  # the run got as far as the broken step
    assert gc.get_freeze_count() == 0


def test_runs_at_once_in_one_process_restore_the_collector_when_the_last_ends(interactive_collector):
    first, second = batch_collector(), batch_collector()
    before = gc.get_threshold()
    first.__enter__()
    second.__enter__()
    frozen = gc.get_freeze_count()
    assert frozen > 1000
    first.__exit__(None, None, None)  # the first run ends while the second goes on
    assert gc.get_freeze_count() == frozen and gc.get_threshold() == RUN_THRESHOLDS
    second.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def cyclic_garbage_but_classes() -> int:
    """The objects a collection finds unreachable, less the classes among them and what they
    reach: a response class made per event is a cycle by nature (a class is in its own
    ``__mro__``), and goes to the collector once the caches of recent classes drop it."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    ids = {id(o) for o in found}
    classes: set[int] = set()
    stack = [o for o in found if isinstance(o, type)]
    while stack:
        o = stack.pop()
        if id(o) not in classes:
            classes.add(id(o))
            stack.extend(r for r in gc.get_referents(o) if id(r) in ids and id(r) not in classes)
    return len(found) - len(classes)


def test_an_events_state_is_freed_as_it_ends_not_left_to_the_collector(runner, tmp_path):
    """Nothing a run makes per event is a reference cycle (a closure calling itself, a context
    holding a function that holds it), its response classes aside: the collector finds the same
    garbage in a run of 12 events as in one of 3 (the steps, not the report's pages), so
    collections can be rare without memory piling up. Before: 185 more objects an event."""
    def garbage(events: int, workspace: str) -> int:
        gc.collect()
        gc.disable()
        try:
            result = runner.invoke(cli, ["run", "airline", "--events", str(events), "--workspace",
                                         str(tmp_path / workspace), "--model", "mock/demo", "--until", "verdicts"])
            assert result.exit_code in (0, 1), result.output
            return cyclic_garbage_but_classes()
        finally:
            gc.enable()

    garbage(3, "first")  # first use: classes, caches and imports made once
    few, more = garbage(3, "few"), garbage(12, "more")
    assert more - few < 100, (few, more)
