"""Where a run's CPU goes, function by function: exact CPU time (``time.thread_time``) spent in
each of a list of synchronous functions during ``bench/scale_bench.py``'s one-process run
(airline, EVENTS events over the local test server at 0.3 s latency, 32 in flight).

    python bench/cpu_parts.py [--events 200] [module:Qualified.name ...]

A sampling profile overstates small functions and cannot say how long one took; these timers
can, for the functions named (each call's own CPU, including what it calls: a function named
inside another is counted in both). The figures are of the run as it is: a function costs
2–7× more here than in a tight loop of its own (``ChatCompletion.model_validate_json``: 7 µs in a
loop, ~50 µs in a run), since one call's pieces run with cold caches. Coroutines cannot be timed
this way (their time is spent between awaits); name the synchronous functions they call.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import inspect
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from llm_bench import server_process  # noqa: E402
from scale_bench import plan_for  # noqa: E402

from intellagent.environment import load_environment  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.runner import drive, run_plan  # noqa: E402
from intellagent.store import Store  # noqa: E402

DEFAULT = [
    "intellagent_plugins.intellagent.generator:SymbolicEvents._apply",
    "intellagent.store.calls:CallLog.record_answer",
    "intellagent.environment.loader:Environment.seed_database",
    "intellagent.prompts:PromptFiles.render",
    "intellagent.llm.types:ChatRequest.canonical",
    "intellagent_plugins.providers.openai_compatible:_read_completion",
    "intellagent_plugins.providers.openai_compatible:_body",
    "intellagent.llm.client:LLM._request",
    "intellagent.items:typed",
    "intellagent.report:write_reports",
    "intellagent.report:build_report",
]


def timed(target: str, totals: dict[str, list[float]]) -> None:
    """Replace ``module:Owner.name`` by a wrapper that adds each call's CPU to ``totals``."""
    module, qualified = target.split(":")
    owner: object = importlib.import_module(module)
    *path, name = qualified.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    if asyncio.iscoroutinefunction(original):
        raise SystemExit(f"{target} is a coroutine function: name the functions it calls")
    totals[target] = [0.0, 0]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            totals[target][0] += time.thread_time() - started
            totals[target][1] += 1

    # a static method is read as its function, a class method as bound to its class: either way
    # the wrapper takes the arguments as given
    static = isinstance(inspect.getattr_static(owner, name), (staticmethod, classmethod))
    setattr(owner, name, staticmethod(wrapper) if static else wrapper)
    if not path:  # a module's function: also where another module bound it at import (from m import f)
        for other in list(sys.modules.values()):
            found = getattr(other, "__dict__", {})
            for key in [k for k, v in found.items() if v is original]:
                found[key] = wrapper


class Collections:
    """CPU spent in the garbage collector while counting, by generation (a collection runs
    inside whatever function allocated the object that set it off, so it is also in that
    function's figure)."""

    def __init__(self) -> None:
        self.cpu, self.runs, self.counting, self._started = [0.0] * 3, [0] * 3, False, 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict) -> None:
        if not self.counting:
            return
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.cpu[info["generation"]] += time.thread_time() - self._started
            self.runs[info["generation"]] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("targets", nargs="*", help="module:Qualified.name (default: the pipeline's largest parts)")
    args = parser.parse_args()
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    totals: dict[str, list[float]] = {}
    for target in args.targets or DEFAULT:
        timed(target, totals)
    with server_process(latency=0.3, list_items=5, port=0) as server, tempfile.TemporaryDirectory() as tmp:
        store = Store.for_workspace(tmp)
        plan = plan_for(registry, server.base_url, args.events, 32)
        collections = Collections()
        collections.counting, cpu = True, time.process_time()
        result = drive(run_plan(plan, env, store=store, registry=registry, workspace=Path(tmp),
                                progress_stream=open("/dev/null", "w")))
        cpu, collections.counting = time.process_time() - cpu, False
        calls = sum(1 for c in store.calls(result.run_id) if not c.cached)
    print(f"airline, {args.events} events: process CPU {cpu:.2f} s over {calls} model calls "
          f"({cpu / calls * 1000:.2f} ms a call)")
    print(f"{'CPU':>8} {'share':>6} {'calls':>7} {'per call':>10}  function")
    for target, (seconds, n) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"{seconds:7.3f}s {seconds / cpu:6.1%} {n:7d} {seconds / max(n, 1) * 1e6:8.0f}µs  {target}")
    for generation, (seconds, n) in enumerate(zip(collections.cpu, collections.runs)):
        print(f"{seconds:7.3f}s {seconds / cpu:6.1%} {n:7d} {seconds / max(n, 1) * 1e6:8.0f}µs  "
              f"garbage collection, generation {generation}")


if __name__ == "__main__":
    main()
