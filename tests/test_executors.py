"""Executors that spread one run over several processes: ``processes`` (workers on this machine)
and ``ray`` (Ray tasks; a local Ray instance started by the tests on 127.0.0.1). Each worker
takes items through the store: every item is made once, by one process; a killed worker's
items are finished by another; the report equals a one-process run's; a rate limit holds across
processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from intellagent.cli import cli
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer
from intellagent_plugins.reporters.writers import read_report

pytestmark = pytest.mark.slow  # worker processes and a Ray cluster

EVENTS = 16


def report_of(workspace: Path) -> dict:
    path = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)[-1]
    return read_report(path)


def comparable(report: dict) -> dict:
    return {"metrics": report["metrics"], "items": report["items"], "outcomes": report["outcomes"]}


@pytest.fixture(scope="module")
def model_server():
    """A local OpenAI-compatible server answering in 50 ms: an event takes about half a second,
    so a worker that starts a second late still finds items to take."""
    with OpenAIServer(latency=0.05, list_items=3) as server:
        yield server


@pytest.fixture
def slow_model(model_server):
    model_server.hold = None
    yield ["--set", f"llm.default={{model: gpt-4o-mini, base_url: '{model_server.base_url}'}}"]
    model_server.hold = None


def until_two_take_units(workspace: Path):
    """A server hold: once the run's items are being taken, no answer until a second process has
    taken one (on a loaded machine a worker process may take seconds to start, and the first
    process alone would otherwise take every item before it does)."""
    def hold() -> bool:
        path = workspace / "intellagent.db"
        if not path.exists():
            return False
        conn = sqlite3.connect(path)
        try:
            owners = conn.execute("SELECT COUNT(DISTINCT owner) FROM work_units").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not there yet
            return False
        finally:
            conn.close()
        return owners == 1
    return hold


def units(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT owner, COUNT(*) FROM work_units WHERE done GROUP BY owner").all()
    return {owner.split(":", 3)[-1] if owner.count(":") >= 3 else "coordinator": n for owner, n in rows}


def paid_twice(store: Store) -> int:
    with store.engine.connect() as conn:
        made = [h for h, in conn.exec_driver_sql("SELECT request_hash FROM llm_calls WHERE NOT cached")]
    return len(made) - len(set(made))


def check_complete(report: dict, store: Store) -> None:
    """Every event reached the end once: one item per event at every per-event step."""
    assert sum(report["outcomes"].values()) == EVENTS
    for step in report["steps"]:
        if step["each"]:
            assert step["items"] == EVENTS, step
    assert paid_twice(store) == 0


def test_other_tasks_run_between_items_whose_work_never_suspends():
    """With a mock model (or cached answers) an item's work never suspends: a worker ran a whole
    fan-out in one turn of the event loop (15.6 s of a 600-event mock run), so claims were not
    renewed and the cancelled timers of its calls' timeouts, each holding its call's context,
    piled up (18,400 of them 45 s into a 3,000-event mock run). The loop must get a turn
    between items."""
    from intellagent.executors import LocalConfig, LocalExecutor

    async def main() -> list[int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        seen: list[int] = []

        async def work(item: int) -> None:  # never suspends
            seen.append(ticks)

        running = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        await LocalExecutor(LocalConfig()).map(work, range(20), limit=2)
        running.cancel()
        return seen

    seen = asyncio.run(main())
    assert len(seen) == 20 and seen[-1] - seen[0] >= 9, seen  # a turn after every two items


def test_processes_share_the_items_of_one_run(runner, tmp_path, slow_model, model_server):
    reference = tmp_path / "one"
    args = ["run", "retail", "--events", str(EVENTS), *slow_model]
    assert runner.invoke(cli, [*args, "--workspace", str(reference)]).exit_code == 0
    ws = tmp_path / "two"
    model_server.hold = until_two_take_units(ws)
    result = subprocess.run([sys.executable, "-m", "intellagent", *args, "--workspace", str(ws),
                             "--executor", "processes", "--workers", "2",
                             "--set", "executor.with.items_in_flight=2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert re.search(rf"dialogs\s+{EVENTS}/{EVENTS}\s", result.stderr)  # every worker's items
    store = Store.for_workspace(ws)
    split = units(store)
    assert sum(split.values()) == EVENTS and len(split) == 2, split  # both processes worked
    check_complete(report_of(ws), store)
    assert comparable(report_of(ws)) == comparable(report_of(reference))


def test_a_budget_holds_across_processes(runner, tmp_path, slow_model, model_server):
    """Each worker rebuilds the run's plan, budget included; together they spend no more than
    it (each alone could spend all of it), and the run says what is left after all of them."""
    args = ["run", "retail", "--events", str(EVENTS), *slow_model]
    reference = tmp_path / "one"
    assert runner.invoke(cli, [*args, "--workspace", str(reference)]).exit_code == 0
    whole = sum(c["prompt_tokens"] + c["completion_tokens"] for c in report_of(reference)["cost"])
    budget = whole // 2
    ws = tmp_path / "two"
    model_server.hold = until_two_take_units(ws)
    result = subprocess.run([sys.executable, "-m", "intellagent", *args, "--workspace", str(ws),
                             "--executor", "processes", "--workers", "2", "--quiet",
                             "--set", "executor.with.items_in_flight=2",
                             "--set", f"llm.budget_tokens={budget}"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stderr  # the budget stopped it
    assert len(units(Store.for_workspace(ws))) == 2  # both processes worked
    spent = sum(c["prompt_tokens"] + c["completion_tokens"] for c in report_of(ws)["cost"])
    assert 0 < spent <= budget
    assert f"budget: {budget - spent} of {budget} tokens left unspent; the next call could cost" in result.stdout
    assert "run status: budget-exhausted" in result.stdout  # whichever process was refused


def test_a_rate_limit_holds_across_processes(tmp_path):
    """Two processes' limiters on one store: together never more than the limit per minute."""
    from intellagent.llm.limits import RateLimiter

    path = tmp_path / "intellagent.db"
    Store.for_workspace(tmp_path)
    script = (
        "import asyncio, sys\n"
        "from intellagent.llm.limits import RateLimiter\n"
        "from intellagent.store import Store\n"
        f"store = Store('sqlite:///{path}')\n"
        "limiter = RateLimiter(5, None); limiter.share(store, 'run-1')\n"
        "async def main():\n"
        "    got = 0\n"
        "    for _ in range(4):\n"
        "        try:\n"
        "            await asyncio.wait_for(limiter.acquire(10), 2.0); got += 1\n"
        "        except asyncio.TimeoutError:\n"
        "            break\n"
        "    print(got)\n"
        "asyncio.run(main())\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    granted = [int(p.communicate(timeout=60)[0].strip()) for p in procs]
    assert sum(granted) == 5, granted  # 4 + 4 asked, 5 per minute allowed in all
    alone = RateLimiter(5, None)  # without sharing, each process would have taken 4
    assert asyncio.run(_take(alone, 4)) == 4


async def _take(limiter, n: int) -> int:
    for _ in range(n):
        await asyncio.wait_for(limiter.acquire(1), 1.0)
    return n


# -- Ray ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'intellagent[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def _run_in_thread(argv: list[str]) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go() -> None:
        from click.testing import CliRunner

        out["result"] = CliRunner().invoke(cli, argv)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, out


def test_ray_workers_share_a_postgresql_store_and_survive_a_killed_worker(
        ray_local, tmp_path, postgres_url, slow_model):
    """Two Ray workers (and not the driver) take the items of a run on PostgreSQL; one is
    killed while it holds items: the other finishes them, nothing lost, nothing paid twice."""
    ws = tmp_path / "ws"
    thread, out = _run_in_thread(["run", "retail", "--events", str(EVENTS), *slow_model,
                                  "--workspace", str(ws), "--store", postgres_url,
                                  "--executor", "ray", "--workers", "2",
                                  "--set", "executor.with.items_in_flight=2",
                                  "--set", "executor.with.driver_works=false"])
    store = Store(postgres_url)
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline and thread.is_alive():
        with store.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT owner FROM work_units WHERE NOT done "
                                        "AND owner LIKE :w"), {"w": "%:ray-0"}).all()
        if rows:
            victim = int(rows[0][0].split(":")[1])
            os.kill(victim, signal.SIGKILL)
        time.sleep(0.05)
    thread.join(300)
    assert victim is not None, "ray-0 never took an item"
    result = out["result"]
    assert result.exit_code == 0, result.output
    split = units(store)
    assert set(split) <= {"ray-0", "ray-1"} and split.get("ray-1", 0) > 0, split
    with store.engine.connect() as conn:
        finished_by_other = conn.execute(sa.text(
            "SELECT COUNT(*) FROM work_units WHERE owner LIKE :w"), {"w": "%:ray-1"}).scalar()
    assert finished_by_other >= 1
    check_complete(report_of(ws), store)
    with store.engine.connect() as conn:  # each event's items recorded once for the run
        per_item = conn.exec_driver_sql("SELECT step, item, COUNT(*) FROM run_items GROUP BY step, item "
                                        "HAVING COUNT(*) > 1").all()
    assert per_item == []


def test_heavy_dependencies_are_imported_only_when_used():
    code = ("import sys\nfrom intellagent.cli import main\nsys.argv = ['intellagent', 'envs']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('ray', 'psycopg', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
