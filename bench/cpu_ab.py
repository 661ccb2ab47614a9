"""CPU per model call of this checkout against another one, measured side by side.

    python bench/cpu_ab.py OTHER [--pairs 4] [--events 200] [--python .venv/bin/python]

OTHER is another checkout of the repository (another commit) with its own environment
(``OTHER/.venv`` unless ``--python`` names the interpreter relative to each checkout). Each pair
runs ``bench/scale_bench.py``'s one-process measurement (airline, EVENTS events over the local
test server at 0.3 s latency, 32 in flight, client CPU over the whole run divided by its model
calls) in this checkout and in OTHER *at the same time*, one on each core, and prints both
figures and their ratio; then the median ratio over the pairs.

Why side by side: on a shared virtual machine the CPU time of the same work moves by 15 % and
more from one minute to the next (``scale_bench``'s host reference went from 23 to 39 ms within
a single run), so two runs one after the other mostly compare two moments of the machine. Two
runs at once meet the same moments: two runs of the same checkout this way agree within ~4 % (5 A/A pairs: 0.97–1.04).
The ratio is the figure to read; each run's own figure still moves with the hour.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import asyncio, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, 'bench')
from scale_bench import plan_for
from llm_bench import server_process
from intellagent.environment import load_environment
from intellagent.registry import load_registry
from intellagent.runner import run_plan
from intellagent.store import Store
try:
    from intellagent.runner import drive  # the CLI's event loop, where the checkout has one
except ImportError:
    drive = asyncio.run
registry = load_registry()
env = load_environment(registry.resolve('environment', 'airline').value)
with server_process(latency=0.3, list_items=5, port=0) as server, tempfile.TemporaryDirectory() as tmp:
    store = Store.for_workspace(tmp)
    plan = plan_for(registry, server.base_url, int(sys.argv[1]), 32)
    cpu = time.process_time()
    result = drive(run_plan(plan, env, store=store, registry=registry, workspace=Path(tmp),
                                  progress_stream=open('/dev/null', 'w')))
    cpu = time.process_time() - cpu
    calls = sum(1 for c in store.calls(result.run_id) if not c.cached)
    print('CPU', cpu / calls * 1000, calls)
"""
"""The measurement, as each checkout's own code runs it (only APIs both sides have)."""


def start(checkout: Path, python: str, events: int) -> subprocess.Popen:
    interpreter = Path(python) if Path(python).is_absolute() else checkout / python
    if not interpreter.exists():
        raise SystemExit(f"cpu_ab: no interpreter at {interpreter} (give --python)")
    return subprocess.Popen([str(interpreter), "-c", CHILD, str(events)], cwd=checkout,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def figure(proc: subprocess.Popen, checkout: Path) -> float:
    out, _ = proc.communicate()
    for line in out.splitlines():
        if line.startswith("CPU "):
            return float(line.split()[1])
    raise SystemExit(f"cpu_ab: the run in {checkout} printed no figure (exit {proc.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--python", default=".venv/bin/python")
    args = parser.parse_args()
    if not 1 <= args.pairs <= 50 or not 5 <= args.events <= 5000:
        raise SystemExit("cpu_ab: --pairs from 1 to 50, --events from 5 to 5000")
    other = args.other.resolve()
    ratios = []
    print(f"CPU per model call, {args.events} events, this checkout ({HERE}) against {other}, "
          "run at the same time:")
    for pair in range(1, args.pairs + 1):
        here_run, other_run = start(HERE, args.python, args.events), start(other, args.python, args.events)
        here, there = figure(here_run, HERE), figure(other_run, other)
        ratios.append(here / there)
        print(f"  pair {pair}: this {here:.2f} ms, other {there:.2f} ms, ratio {here / there:.3f}")
    print(f"median ratio this / other over {len(ratios)} pairs: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}–{max(ratios):.3f})")


if __name__ == "__main__":
    sys.exit(main())
