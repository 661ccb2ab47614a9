"""A run's event loop is uvloop's where it is installed (as it is on Linux and macOS), asyncio's
with INTELLAGENT_EVENT_LOOP=asyncio, and the command line's runs go through it."""

from __future__ import annotations

import asyncio
import types

import uvloop

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.runner import drive


async def _loop_kind() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_a_coroutine_is_driven_on_uvloop_and_its_value_returned(monkeypatch):
    monkeypatch.delenv("INTELLAGENT_EVENT_LOOP", raising=False)
    assert drive(_loop_kind()) is uvloop.Loop


def test_the_environment_variable_asks_for_asyncios_own_loop(monkeypatch):
    monkeypatch.setenv("INTELLAGENT_EVENT_LOOP", "asyncio")
    kind = drive(_loop_kind())
    assert kind is not uvloop.Loop and issubclass(kind, asyncio.BaseEventLoop)


def test_an_error_raised_in_the_coroutine_reaches_the_caller(monkeypatch):
    monkeypatch.delenv("INTELLAGENT_EVENT_LOOP", raising=False)

    async def fails() -> None:
        await asyncio.sleep(0)
        raise LookupError("from the run")

    try:
        drive(fails())
    except LookupError as exc:
        assert str(exc) == "from the run"
    else:
        raise AssertionError("the error was lost")


def test_intellagent_run_runs_its_steps_on_uvloop(runner, tmp_path, monkeypatch):
    monkeypatch.delenv("INTELLAGENT_EVENT_LOOP", raising=False)
    seen = []
    plugin = types.ModuleType("loop_observer")
    plugin.before_step = hookimpl(lambda run, step: seen.append(type(asyncio.get_running_loop())))
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--workspace", str(tmp_path)],
                           obj={"plugins": (plugin,)})
    assert result.exit_code == 0, result.output
    assert seen and set(seen) == {uvloop.Loop}
