"""Peak memory of a run over HTTP as the number of events grows (issue 31: flat, ≤ 1.1× from 100
to 1,600 events), on the local OpenAI-compatible test server in its own process (no network).

    python bench/http_memory.py [--events 100 400 1600] [--latency 0.3] [--in-flight 64]
                                [--port 47614] [--top 0]

Each size runs airline in a fresh process of its own (its peak is then its own: the high-water
mark of its resident set, VmHWM) through ``run_plan`` with the test server as every role's model,
and prints the peak, its ratio to the smallest size's and the run's model calls. ``--top N``
also traces the Python allocations of each run (tracemalloc, several times slower) and prints the
N source lines holding the most memory when its LLM layer is closed. Memory outside Python's
allocator (SQLite's in-memory event databases, pydantic-core's validators) is not among them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from llm_bench import server_process  # noqa: E402

CHILD = """
import asyncio, gc, json, sys, tempfile, time, tracemalloc
from pathlib import Path
sys.path.insert(0, {bench!r})
from scale_bench import plan_for
from intellagent.environment import load_environment
from intellagent.registry import load_registry
from intellagent import runner
from intellagent.llm import client
from intellagent.store import Store

top = {top}
if top:
    tracemalloc.start(8)
reg = load_registry()
env = load_environment(reg.resolve('environment', 'airline').value)
plan = plan_for(reg, {base_url!r}, {events}, {in_flight})
held = []
if top:  # the allocations still held when the run's work is done, before anything is closed
    close = client.LLM.aclose
    async def traced_close(llm):
        gc.collect()
        held.append(tracemalloc.take_snapshot())
        return await close(llm)
    client.LLM.aclose = traced_close
with tempfile.TemporaryDirectory() as tmp:
    started, cpu = time.perf_counter(), time.process_time()
    store = Store.for_workspace(tmp)
    result = runner.drive(runner.run_plan(plan, env, store=store, registry=reg, workspace=Path(tmp),
                                           progress_stream=open('/dev/null', 'w')))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    # the run's peak, read before the bench's own counting (a list of every call's row held
    # 23 MiB more at 1,600 events than at 100), which is an aggregate query
    peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))
    calls = sum(row['calls'] - (row['cached'] or 0) for row in store.cost_summary(result.run_id, made_here=True))
lines = []
if held:
    stats = held[0].statistics('lineno')
    lines = [f"{{s.size / 2**20:7.1f}} MiB {{s.count:8d}} blocks  {{s.traceback[0]}}" for s in stats[:top]]
print(json.dumps({{'peak_mib': peak / 1024, 'calls': calls, 'wall': wall, 'cpu': cpu,
                  'outcomes': result.report.outcomes, 'top': lines}}))
"""


def measure(base_url: str, events: int, in_flight: int, top: int) -> dict:
    code = CHILD.format(bench=str(Path(__file__).parent), base_url=base_url, events=events,
                        in_flight=in_flight, top=top)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=7200)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--port", type=int, default=47614,
                        help="The test server's port (0: a free one); the same port gives the same calls.")
    parser.add_argument("--top", type=int, default=0,
                        help="Trace allocations and print the N lines holding the most at the end.")
    args = parser.parse_args()
    print(f"peak memory over HTTP: airline, {args.latency * 1000:.0f} ms latency, {args.in_flight} in "
          "flight, each size in a fresh process (VmHWM)")
    first = None
    with server_process(latency=args.latency, list_items=5, port=args.port) as server:
        for events in args.events:
            got = measure(server.base_url, events, args.in_flight, args.top)
            first = first or got["peak_mib"]
            print(f"  {events:>6} events: peak {got['peak_mib']:.0f} MiB ({got['peak_mib'] / first:.2f}× the "
                  f"first), {got['calls']} model calls, wall {got['wall']:.0f} s, CPU "
                  f"{got['cpu'] / max(1, got['calls']) * 1000:.2f} ms a call", flush=True)
            for line in got["top"]:
                print("     ", line)
    print(f"  ratio {args.events[-1]} / {args.events[0]} events: {got['peak_mib'] / first:.2f}× (target ≤ 1.1×)")


if __name__ == "__main__":
    main()
