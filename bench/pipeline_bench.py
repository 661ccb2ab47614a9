"""Benchmark of the IntellAgent pipeline (no network).

    python bench/pipeline_bench.py [--events 200] [--latency 0.3] [--in-flight 32] [--sample 5000]

1. The full pipeline on ``airline`` against the local OpenAI-compatible server (in its own
   process) at the given latency and concurrency: model calls per stage, edge calls against the
   P(P-1)/2 of pairwise scoring, wall time against the ideal bound, peak memory.
   Ideal bound = the extraction's dependent levels (flows, then policies, then edges), each
   ceil(calls / in-flight) × latency, plus the per-event steps' calls × latency / in-flight.
2. Sampling many events on the mock model: time and peak memory (storing items: engine_bench).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from llm_bench import server_process  # noqa: E402

from intellagent.environment import load_environment  # noqa: E402
from intellagent.llm import LLM  # noqa: E402
from intellagent.plan import load_plan  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.runner import run_plan  # noqa: E402
from intellagent.store import Store  # noqa: E402
from intellagent.testing.harness import run_step, step_context  # noqa: E402
from intellagent_plugins.intellagent.extractor import Config as ExtractorConfig, PolicyGraphExtractor  # noqa: E402
from intellagent_plugins.intellagent.sampler import Config as SamplerConfig, WeightedWalk  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def full_pipeline(events: int, latency: float, in_flight: int) -> None:
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    with server_process(latency=latency, list_items=5) as server, tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        overrides = [("llm.default", {"model": "gpt-4o-mini", "base_url": server.base_url}, "bench"),
                     ("llm.max_concurrency", in_flight, "bench")]
        plan = load_plan(None, registry, overrides=overrides, params={"events": str(events)})
        store = Store.for_workspace(workspace)
        started = time.perf_counter()
        result = await run_plan(plan, env, store=store, registry=registry, workspace=workspace,
                                progress_stream=open("/dev/null", "w"))
        wall = time.perf_counter() - started
        calls = [c for c in store.calls(result.run_id) if not c.cached]
        graph = result.data.value("graph")
    by_step = Counter(c.stage for c in calls)
    by_role = Counter(c.role for c in calls)
    p = len(graph.policies)
    levels = [1, len(graph.flows), by_role["edges"]]
    extract_ideal = sum(math.ceil(n / in_flight) * latency for n in levels if n)
    event_calls = sum(n for step, n in by_step.items() if step != "graph")
    ideal = extract_ideal + event_calls * latency / in_flight
    print(f"1. pipeline: airline, {events} events, {latency * 1000:.0f} ms latency, {in_flight} in flight")
    print(f"   model calls by step: {dict(sorted(by_step.items()))} (total {len(calls)})")
    print(f"   policy graph: {p} policies, {len(graph.flows)} flows; edge calls {by_role['edges']} "
          f"vs {p * (p - 1) // 2} pairwise")
    print(f"   wall {wall:.1f} s vs ideal bound {ideal:.1f} s ({100 * (wall / ideal - 1):+.0f} %); "
          f"peak RSS {peak_rss_mb():.0f} MB; outcome {result.report.outcomes}")


def sampling(count: int) -> None:
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    from intellagent.pipeline import LLMSettings, ModelSettings

    settings = LLMSettings(default=ModelSettings(model="mock/schema", options={"list_items": 5}))
    graph = asyncio.run(run_step(PolicyGraphExtractor(ExtractorConfig()), env, seed=1,
                                 llm=LLM(settings, store=Store.in_memory(), seed=1))).value
    tracemalloc.start()
    started = time.perf_counter()
    specs = WeightedWalk(SamplerConfig(events=count)).run(step_context(env, seed=1), graph)
    sampled = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    print(f"2. sampling {len(specs)} events on the mock model ({len(graph.policies)} policies): "
          f"{sampled:.2f} s; peak Python memory {peak / 2**20:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--sample", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(full_pipeline(args.events, args.latency, args.in_flight))
    sampling(args.sample)


if __name__ == "__main__":
    main()
