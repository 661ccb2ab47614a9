"""Engine overhead per step item, on a 4-step pipeline whose steps do (almost) nothing.

    python bench/engine_bench.py [--items 5000]

Prints, for N items through source → a → b → c (three per-item steps, each making one mock/schema
structured call, so the figures include the LLM layer's bookkeeping but no model time):

1. a fresh run: wall time and engine + store time per step item;
2. the same run again: every item reused from the store (cache lookup per item);
3. peak RSS of a fresh run at N/5 and N items, each in its own process (flat = close).

Target (issue 8): under 2 ms of engine overhead per step item; memory flat in N.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from pydantic import BaseModel

from intellagent import hookimpl
from intellagent.steps import Extractor, Generator, Output, Score

SPEC = {
    "llm": {"default": {"model": "mock/schema"}, "max_concurrency": 64},
    "steps": {"source": {"use": "bench/source", "with": {}},
              "a": {"use": "bench/a", "each": "source"},
              "b": {"use": "bench/b", "each": "a"},
              "c": {"use": "bench/c", "each": "b"}},
    "metrics": {"ok": {"use": "rate", "with": {"score": "c", "passed": ["ok"], "failed": []}}},
    "report": [],
}


class Item(BaseModel):
    id: str
    value: int


class Answer(BaseModel):
    value: int


def make_plugin(n: int) -> types.ModuleType:
    class Source(Extractor):
        name = "source"
        output = list[Item]

        def run(self, ctx):
            return [Item(id=f"I{i:06d}", value=i) for i in range(n)]

    def stage(step_name: str) -> type:
        class One(Generator):
            name = step_name
            inputs = {"item": Item}
            output = Item
            roles = {"worker": "answers"}

            async def run(self, ctx, item):
                out = await ctx.llm.structured([{"role": "user", "content": f"{step_name} {item.id}"}],
                                               Answer, role="worker")
                value = Item(id=item.id, value=item.value + (out.value.value if out.ok else 0))
                return Output(value=value, scores=[Score(name=step_name, status="ok")])
        return One

    plugin = types.ModuleType("bench")
    plugin.register_stages = hookimpl(lambda register: [register(c) for c in
                                                        (Source, stage("a"), stage("b"), stage("c"))])
    return plugin


def run_once(n: int, workspace: Path) -> dict:
    from intellagent.environment import load_environment
    from intellagent.registry import load_registry
    from intellagent.store import Store
    from intellagent.testing.harness import run_pipeline

    import intellagent_environments

    registry = load_registry(plugins=[make_plugin(n)])
    env = load_environment(Path(intellagent_environments.__file__).parent / "education")
    spec = json.loads(json.dumps(SPEC))
    started = time.perf_counter()
    cpu = time.process_time()
    result = run_pipeline(spec, env, store=Store.for_workspace(workspace), registry=registry)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    ok = result.report.metrics["ok"].values["n"]
    return {"items": n, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "scored": ok,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def child(n: int, workspace: str) -> None:
    print(json.dumps(run_once(n, Path(workspace))))


def in_process(n: int, workspace: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n), str(workspace)],
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def mock_only(n: int) -> float:
    """CPU seconds of the same number of mock/schema calls made directly (no engine)."""
    import asyncio

    from intellagent.llm import LLM

    async def go() -> float:
        llm = LLM(cache=False)
        started = time.process_time()
        for i in range(n):
            await llm.structured([{"role": "user", "content": f"x {i}"}], Answer, role="worker")
        return time.process_time() - started

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    n = args.items
    step_items = 3 * n + 1
    with tempfile.TemporaryDirectory() as tmp:
        fresh = in_process(n, Path(tmp) / "ws")
        again = in_process(n, Path(tmp) / "ws")
        small = in_process(n // 5, Path(tmp) / "small")
    calls_cpu = mock_only(3 * n)
    engine = (fresh["cpu_s"] - calls_cpu) / step_items * 1000
    print(f"pipeline: source → a → b → c, {n} items, {step_items} step items, {3 * n} mock calls")
    print(f"1. fresh run: wall {fresh['wall_s']} s, CPU {fresh['cpu_s']} s; the mock calls alone "
          f"{calls_cpu:.2f} s CPU; engine + store {engine:.2f} ms per step item (target < 2 ms)")
    print(f"2. rerun, everything reused: wall {again['wall_s']} s = "
          f"{again['wall_s'] / step_items * 1000:.2f} ms per step item (lookup, no model call)")
    print(f"3. peak RSS: {small['peak_rss_mb']} MB at {n // 5} items, {fresh['peak_rss_mb']} MB at "
          f"{n} items (ratio {fresh['peak_rss_mb'] / small['peak_rss_mb']:.2f}; flat = close to 1)")


if __name__ == "__main__":
    main()
