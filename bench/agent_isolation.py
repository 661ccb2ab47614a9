"""A sync agent must not serialise the run: the same pipeline with a sync and an async Python agent
that each take ``--sleep`` seconds a turn (no network, mock models for every other role).

    python bench/agent_isolation.py [--events 16] [--sleep 0.5] [--repeat 3]

Prints the wall time of each (the median of ``--repeat`` runs, each in a fresh workspace) and the
ratio sync / async; the target is ≤ 1.2 at the default concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from intellagent.environment import load_environment  # noqa: E402
from intellagent.plan import load_plan  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.runner import drive, run_plan  # noqa: E402
from intellagent.store import Store  # noqa: E402

SLEEP = {"seconds": 0.5}


def sync_agent(messages, tools):
    time.sleep(SLEEP["seconds"])
    return "I can help with that."


async def async_agent(messages, tools):
    await asyncio.sleep(SLEEP["seconds"])
    return "I can help with that."


def wall(agent: str, events: int) -> float:
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "education").value)
    overrides = [("agent", {"use": "python", "with": {"callable": f"bench.agent_isolation:{agent}"}}, "bench")]
    plan = load_plan(None, registry, overrides=overrides, params={"events": str(events)})
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.for_workspace(tmp)
        started = time.perf_counter()
        drive(run_plan(plan, env, store=store, registry=registry, workspace=Path(tmp),
                        progress_stream=open("/dev/null", "w")))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=16)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    SLEEP["seconds"] = args.sleep
    sys.modules.setdefault("bench.agent_isolation", sys.modules[__name__])
    figures = {}
    for agent in ("async_agent", "sync_agent"):
        runs = [wall(agent, args.events) for _ in range(args.repeat)]
        figures[agent] = statistics.median(runs)
        print(f"{agent:<12} {args.events} events, {args.sleep:g} s a turn: wall {figures[agent]:.2f} s "
              f"(median of {args.repeat}: {', '.join(f'{r:.2f}' for r in runs)})")
    ratio = figures["sync_agent"] / figures["async_agent"]
    print(f"sync / async wall: {ratio:.2f} (target ≤ 1.2)")


if __name__ == "__main__":
    main()
