"""A run sets the garbage collector for a batch job while it goes on, and puts it back after."""

from __future__ import annotations

import gc
import types

import pytest

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.runner import _BATCH_GC, batch_collector
from tests.conftest import REPO


@pytest.fixture
def interactive_collector():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    yield
    gc.set_threshold(*saved)


def test_a_run_freezes_what_exists_and_collects_young_objects_less_often(interactive_collector, runner, tmp_path):
    seen = []
    plugin = types.ModuleType("gc_observer")
    plugin.before_step = hookimpl(lambda run, step: seen.append((gc.get_threshold(), gc.get_freeze_count())))
    result = runner.invoke(cli, ["run", "education", "--events", "3", "--workspace", str(tmp_path)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    assert len(seen) == 5
    assert all(threshold == (_BATCH_GC, 10, 10) and frozen > 1000 for threshold, frozen in seen)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_failed_run_puts_the_collector_back_too(interactive_collector, runner, tmp_path):
    from tests.test_observers import broken_generator

    errors = []
    observer = types.ModuleType("gc_error_observer")
    observer.on_run_error = hookimpl(lambda run, error: errors.append(gc.get_threshold()))
    steps = types.ModuleType("brokenstages")
    steps.register_stages = hookimpl(lambda register: register(broken_generator()))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
        "{use: symbolic-events,", "{use: brokenstages/broken-events,"))
    result = runner.invoke(cli, ["run", "education", "--pipeline", str(pipeline), "--events", "2",
                                 "--workspace", str(tmp_path / "ws")], obj={"plugins": (observer, steps)})
    assert result.exit_code != 0
    assert errors == [(_BATCH_GC, 10, 10)]  # the run got as far as the broken step
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_runs_at_once_in_one_process_restore_the_collector_when_the_last_ends(interactive_collector):
    first, second = batch_collector(), batch_collector()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold()[0] == _BATCH_GC
    first.__exit__(None, None, None)  # the first run ends while the second goes on
    assert gc.get_threshold()[0] == _BATCH_GC and gc.get_freeze_count() > 0
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
