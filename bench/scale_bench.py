"""Scale benchmark of the IntellAgent pipeline on airline (no network; the local
OpenAI-compatible server runs in its own process, so its CPU is not the client's).

    python bench/scale_bench.py [--events 200] [--latency 0.3] [--in-flight 32]
                                [--throughput-events 1500] [--wide 128]
                                [--memory-events 10000] [--memory-small 2000] [--port 47613]
                                [--no-pin] [--skip ...]

Prints (issue 14's targets):

0. a host reference: the CPU time of a fixed piece of pure-Python work, at the start, right after
   the CPU figure (which is flagged when the two differ by more than 15 %: the machine's speed
   changed during the run) and at the end (figures of different hours compare only at a similar
   reference);
1. one process, EVENTS events at LATENCY s, IN-FLIGHT requests in flight: the client's CPU per
   model call (process CPU time, robust to other load on the machine: the whole run divided by
   its calls, and the median over 2-second windows) against the 2 ms target, the test server on
   a core of its own unless ``--no-pin``; wall time against
   the latency-bound schedule, target ≤ 1.2×: the graph's dependent levels (the structured-output
   probe that ``structured: auto`` sends to an endpoint of unknown kind, the task and flows call,
   the per-flow policy calls, the edge calls), each ceil(calls / in-flight) × latency, then the
   run's own events, each its chain of sequential calls, replayed with no client overhead under
   the local executor's scheduling (what the calls' latency alone makes of the run). Also the
   lower bound, the graph's levels plus max(Σ calls / in-flight, the longest event's chain) ×
   latency, and how far the schedule itself is from it; and the LLM layer's own CPU per call on
   small requests, which splits the run's CPU into the calls' share and the pipeline's own work
   per event;
2. throughput of THROUGHPUT-EVENTS events (the graph built beforehand, so only events are timed)
   at WIDE requests in flight per process: one process, then the processes executor with one
   worker per core; target ≥ 1.7×. Over each whole run (its wall includes each process's start
   and the report, and the tail while the last events' chains of sequential calls finish) and
   sustained (calls answered between the 10th and the 90th percentile of answers, per second: the
   rate the target reads, throughput being a rate);
   also two independent one-process runs at once (each of all the events, no work shared):
   what two processes get from this machine at that moment, the yardstick of the executor's
   own overhead; and the test server's CPU, which shares the machine's cores. 1,500 events by
   default: with a few hundred, two processes at 128 in flight each finish before either is
   limited by CPU, and the run measures chain latency rather than throughput;
3. peak RSS of a mock-model run of MEMORY-SMALL and of MEMORY-EVENTS events, each in its own
   process (target: under 400 MB at 10,000 events, flat in the number of events). The child's own
   high-water mark (VmHWM): its ``ru_maxrss`` starts at what this process held when it forked.
   Also the size of the large run's report.html and of its largest item page;
4. resume: a run stopped by its budget, then resumed: report folders written (target 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import heapq
import itertools
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from llm_bench import Extracted, make_llm, messages, server_process  # noqa: E402

from intellagent.environment import load_environment  # noqa: E402
from intellagent.executors import items_in_flight  # noqa: E402
from intellagent.llm import client as llm_client  # noqa: E402
from intellagent.plan import load_plan  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.runner import drive, run_plan  # noqa: E402
from intellagent.store import Store  # noqa: E402

HERE = Path(__file__).resolve().parent


def plan_for(registry, base_url: str, events: int, in_flight: int, executor: str = "local"):
    overrides = [("llm.default", {"model": "gpt-4o-mini", "base_url": base_url}, "bench"),
                 ("llm.max_concurrency", in_flight, "bench"), ("executor", {"use": executor}, "bench")]
    return load_plan(None, registry, overrides=overrides, params={"events": str(events)})


class CallMeter:
    """Counts answered model calls in this process (for CPU per call over time windows)."""

    def __init__(self) -> None:
        self.calls = 0
        self.samples: list[tuple[float, float, int]] = []  # (wall, cpu, calls)
        original = llm_client.LLM._ask

        async def counted(llm, *args, **kwargs):
            out = await original(llm, *args, **kwargs)
            self.calls += 1
            return out

        llm_client.LLM._ask = counted

    async def sample(self, every: float = 2.0) -> None:
        while True:
            self.samples.append((time.perf_counter(), time.process_time(), self.calls))
            await asyncio.sleep(every)

    def window_medians(self, min_calls: int = 20) -> float | None:
        per_call = [(c2 - c1) / (n2 - n1) for (_, c1, n1), (_, c2, n2) in zip(self.samples, self.samples[1:])
                    if n2 - n1 >= min_calls]
        return statistics.median(per_call) * 1000 if per_call else None


def event_chains(store: Store, run_id: str) -> dict[str, int]:
    """Uncached calls per first-level item (event): its sequential chain."""
    with store.engine.connect() as conn:
        keys = dict(conn.exec_driver_sql(
            "SELECT key, item FROM run_items WHERE run_id = ? AND item != ''", (run_id,)).all())
        rows = conn.exec_driver_sql("SELECT item_key FROM llm_calls WHERE NOT cached AND item_key IS NOT NULL").all()
    chains: Counter = Counter()
    for (item_key,) in rows:
        item = keys.get(item_key)
        if item:
            chains[item.split("/")[0]] += 1
    return dict(chains)


@contextlib.contextmanager
def cores_apart(server, pin: bool):
    """The client on some of this machine's cores and the test server on another, for the time
    of the block (``pin``, and two cores or more; yields how, or None). A model endpoint runs on
    another machine: on one core shared with the test server, the client's CPU time also counts
    the cost of the two taking turns on it (on 2 cores on 2026-11-27, the same code and calls:
    1.71-1.96 ms a call shared in five runs, 1.57-1.89 pinned in six, as docs/scale.md says). Where the cores cannot be set
    (another OS, a container that forbids it), the block runs unpinned and says so."""
    cpus = sorted(os.sched_getaffinity(0)) if pin and hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        yield None
        return
    mine, theirs = set(cpus[:-1]), {cpus[-1]}
    try:
        os.sched_setaffinity(server.proc.pid, theirs)
        os.sched_setaffinity(0, mine)
    except OSError:
        yield None
        return
    try:
        yield f"client on CPU {','.join(map(str, sorted(mine)))}, test server on CPU {cpus[-1]}"
    finally:
        os.sched_setaffinity(0, set(cpus))


async def one_process(events: int, latency: float, in_flight: int, port: int = 0, pin: bool = True) -> None:
    registry = load_registry()
    env = load_environment(registry.resolve("environment", "airline").value)
    meter = CallMeter()
    with server_process(latency=latency, list_items=5, port=port) as server, tempfile.TemporaryDirectory() as tmp, \
            cores_apart(server, pin) as pinned:
        workspace = Path(tmp)
        store = Store.for_workspace(workspace)
        plan = plan_for(registry, server.base_url, events, in_flight)
        sampler = asyncio.ensure_future(meter.sample())
        started, cpu = time.perf_counter(), time.process_time()
        result = await run_plan(plan, env, store=store, registry=registry, workspace=workspace,
                                progress_stream=open("/dev/null", "w"))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        sampler.cancel()
        calls = [c for c in store.calls(result.run_id) if not c.cached]
        chains = event_chains(store, result.run_id)
        floor = await layer_floor(server, in_flight)
    by_step = Counter(c.stage for c in calls)
    by_role = Counter(c.role for c in calls if c.stage == "graph")
    # `structured: auto` at an endpoint of unknown kind: one probe request before the first
    # structured call (not a model call of the run, so not in the store)
    probe = 1 if plan.spec.llm.default.structured == "auto" else 0
    levels = [n for n in (probe, 1, by_role.get("extractor", 1) - 1, by_role.get("edges", 0)) if n > 0]
    extract = sum(math.ceil(n / in_flight) for n in levels) * latency
    event_calls = sum(chains.values())
    longest = max(chains.values(), default=0)
    events_bound = max(event_calls / in_flight, longest) * latency
    bound = extract + events_bound
    at_once = items_in_flight(2 * in_flight)  # as the local executor takes them (the runner's bound: twice the slots)
    replay = extract + replayed([chains[k] for k in sorted(chains)], latency, in_flight, at_once)
    window = meter.window_medians()
    print(f"1. one process: airline, {events} events, {latency * 1000:.0f} ms latency, {in_flight} in flight; "
          + (pinned or "client and test server on the same cores (--no-pin, one core, or cores "
                        "this process may not set)"))
    print(f"   model calls {len(calls)} by step {dict(sorted(by_step.items()))}; "
          f"{event_calls / max(1, len(chains)):.1f} calls per event (longest chain {longest})")
    print(f"   client CPU per model call: {cpu / len(calls) * 1000:.2f} ms over the whole run "
          f"(process CPU {cpu:.1f} s / {len(calls)} calls); median over 2 s windows "
          f"{window:.2f} ms (target ≤ 2 ms)" if window else
          f"   client CPU per model call: {cpu / len(calls) * 1000:.2f} ms (target ≤ 2 ms)")
    print(f"   wall {wall:.1f} s vs the latency-bound schedule {replay:.1f} s = {wall / replay:.2f}× "
          f"(target ≤ 1.2×; the schedule: the graph's levels, then this run's events, each its chain "
          f"of sequential calls, replayed by a client with no overhead: exactly {latency} s a call, "
          f"{in_flight} slots, events taken in order {at_once} at a time as the local executor does)")
    print(f"   lower bound {bound:.1f} s = graph levels {levels} calls → {extract:.1f} s + events "
          f"max({event_calls}/{in_flight}, {longest}) × {latency} s = {events_bound:.1f} s "
          f"({'the first level is the structured-output probe' if probe else 'no probe'}); wall "
          f"{wall / bound:.2f}× it, the schedule itself {replay / bound:.2f}× (its tail: the last "
          f"events' chains start late)")
    by_kind = Counter(c.kind for c in calls)
    layer = sum(by_kind[k] * floor[k] for k in floor)
    print(f"   the LLM layer alone on the same server, {in_flight} in flight, small requests: "
          f"{floor['structured'] * 1000:.2f} ms per structured call, {floor['chat'] * 1000:.2f} ms per "
          f"chat call; at those rates the run's {by_kind['structured']} structured and "
          f"{by_kind['chat']} chat calls take {layer:.1f} s of its {cpu:.1f} s, so the rest, at most "
          f"{(cpu - layer) / events * 1000:.1f} ms per event ({(cpu - layer) / len(calls) * 1000:.2f} ms "
          "per call), is the pipeline's own work (response classes, events' and conversations' "
          "databases and hashes, the store, the report)")
    print(f"   outcome {result.report.outcomes}; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


async def layer_floor(server, in_flight: int, calls: int = 400) -> dict[str, float]:
    """CPU seconds per call of the LLM layer alone (store and cache on, as in a run) on small
    requests of its own: a lower bound on what each of the run's calls costs in that layer. The
    run's garbage is collected first: a full collection due then (0.1 s) is the run's, not the
    layer's."""
    gc.collect()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.for_workspace(tmp)
        llm = make_llm(server, store, store.start_run(), max_concurrency=in_flight)
        await llm.structured(messages(-1), Extracted)  # the structured-output probe, and warm-up
        out = {}
        for kind in ("structured", "chat"):
            cpu = time.process_time()
            ask = (lambda i: llm.structured(messages(i), Extracted)) if kind == "structured" else \
                (lambda i: llm.chat(messages(calls + i)))
            outcomes = await asyncio.gather(*[ask(i) for i in range(calls)])
            out[kind] = (time.process_time() - cpu) / calls
            assert all(o.ok for o in outcomes), kind
        await llm.aclose()
    return out


def replayed(chains: list[int], latency: float, slots: int, items_at_once: int) -> float:
    """When the events' phase would end with no client overhead: each event a chain of calls of
    exactly ``latency``, one after another; ``items_at_once`` events in progress, taken in order;
    ``slots`` calls in flight, granted first come first served (as the LLM layer's semaphore)."""
    pending = iter(chains)
    clock = 0.0
    # (asks at, order, calls left): waiting for a slot; in order already, so a heap
    ready = [(0.0, n, calls) for n, calls in enumerate(itertools.islice(pending, items_at_once))]
    running: list[tuple[float, int, int]] = []  # (answered at, order, calls left after it)
    order = len(ready)
    while ready or running:
        while ready and len(running) < slots and ready[0][0] <= clock:
            _, n, left = heapq.heappop(ready)
            heapq.heappush(running, (clock + latency, n, left - 1))
        clock, n, left = heapq.heappop(running)
        if left:
            heapq.heappush(ready, (clock, n, left))
        else:
            nxt = next(pending, None)
            if nxt:
                heapq.heappush(ready, (clock, order, nxt))
                order += 1
        if ready and len(running) < slots:
            clock = max(clock, ready[0][0])
    return clock


def timed_run(workspaces: list[Path], base_url: str, events: int, wide: int, executor: str) -> dict:
    """A CLI run per workspace, each in its own process and all at once; the wall until the last
    ends, their CPU (children included) and calls."""
    args = [[sys.executable, "-m", "intellagent", "run", "airline", "--events", str(events),
             "--workspace", str(workspace), "--executor", executor,
             "--set", f"llm.default={{model: gpt-4o-mini, base_url: '{base_url}'}}",
             "--set", f"llm.max_concurrency={wide}"] for workspace in workspaces]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:  # the logs are files, not pipes: none can fill up
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in args]
        procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=log) for a, log in zip(args, logs)]
        for proc in procs:
            proc.wait(timeout=3600)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        for proc, log in zip(procs, logs):
            if proc.returncode != 0:
                log.seek(0)
                raise SystemExit(log.read()[-2000:])
    answered, owners = [], []
    for workspace in workspaces:
        store = Store.for_workspace(workspace)
        run_id = store.resolve_run("latest")
        with store.engine.connect() as conn:
            answered += [t for (t,) in conn.exec_driver_sql(
                "SELECT created_at FROM llm_calls WHERE NOT cached AND stage != 'graph'")]
            owners += conn.exec_driver_sql("SELECT owner, COUNT(*) FROM work_units WHERE run_id = ? "
                                           "GROUP BY owner", (run_id,)).all()
    answered.sort()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # the sustained rate: calls answered between the 10th and the 90th percentile of answers (the
    # ramp-up and the tail of the last events' sequential chains left out)
    low, high = answered[len(answered) // 10], answered[len(answered) * 9 // 10]
    steady = (len(answered) * 9 // 10 - len(answered) // 10) / max(high - low, 1e-9)
    return {"wall": wall, "calls": len(answered), "cpu": cpu, "split": [n for _, n in owners],
            "steady": steady}


def cores_available(seconds: float = 2.0) -> float:
    """CPU seconds per second that this machine gives two busy processes now (2.0 on a quiet
    2-core machine): the ceiling of any multi-process speed-up measured at the same time."""
    code = ("import time\nt = time.time(); c = time.process_time()\n"
            f"while time.time() - t < {seconds}: pass\nprint(time.process_time() - c)")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return sum(float(p.communicate()[0]) for p in procs) / seconds


def throughput(events: int, latency: float, wide: int, port: int = 0) -> None:
    from intellagent.executors import default_workers

    with server_process(latency=latency, list_items=5, port=port) as server, tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "graph"
        subprocess.run([sys.executable, "-m", "intellagent", "run", "airline", "--until", "specs",
                        "--events", str(events), "--workspace", str(base),
                        "--set", f"llm.default={{model: gpt-4o-mini, base_url: '{server.base_url}'}}"],
                       capture_output=True, check=True, timeout=600)
        results = {}
        # the processes executor against one process, and against two independent one-process
        # runs at once (each of all the events): what two processes get from this machine now
        for name, executor, copies in (("local", "local", 1), ("processes", "processes", 1),
                                       ("pair", "local", 2)):
            workspaces = [Path(tmp) / f"{name}{i}" for i in range(copies)]
            for ws in workspaces:
                shutil.copytree(base, ws)  # the graph is in the store: only the events are timed
            served = server.cpu()
            results[name] = timed_run(workspaces, server.base_url, events, wide, executor)
            results[name]["server"] = server.cpu() - served
    one, many, pair = results["local"], results["processes"], results["pair"]
    rate_one, rate_many = one["calls"] / one["wall"], many["calls"] / many["wall"]
    ideal = wide / latency
    print(f"2. throughput: {events} events at {latency * 1000:.0f} ms, {wide} in flight per process "
          f"(graph built beforehand)")
    print(f"   one process: {one['calls']} calls in {one['wall']:.1f} s = {rate_one:.0f} calls/s, sustained "
          f"{one['steady']:.0f}/s (latency bound {ideal:.0f}/s; CPU {one['cpu'] / one['calls'] * 1000:.2f} ms "
          f"per call, process start included)")
    print(f"   processes executor, {default_workers()} workers: {many['calls']} calls in "
          f"{many['wall']:.1f} s = {rate_many:.0f} calls/s, sustained {many['steady']:.0f}/s (items per "
          f"worker {many['split']}; CPU {many['cpu'] / many['calls'] * 1000:.2f} ms per call)")
    print(f"   ratio {many['steady'] / one['steady']:.2f}× sustained (target ≥ 1.7×: the executor's throughput); "
          f"{rate_many / rate_one:.2f}× over the whole runs (each run's start, its last chains and its report "
          f"are not shared out); CPU this machine gives two busy processes together right now: "
          f"{cores_available():.2f} cores (2.0 on a quiet 2-core machine)")
    print(f"   two independent one-process runs at once, each of the {events} events: "
          f"{pair['calls']} calls in {pair['wall']:.1f} s = {pair['calls'] / pair['wall'] / rate_one:.2f}× "
          f"one process, {pair['steady'] / one['steady']:.2f}× sustained (CPU "
          f"{pair['cpu'] / pair['calls'] * 1000:.2f} ms per call): what two processes get from this "
          "machine now, with no work shared")
    print(f"   the test server on the same cores: {one['server'] / one['calls'] * 1000:.2f} / "
          f"{many['server'] / many['calls'] * 1000:.2f} ms of CPU per call, "
          f"{one['server'] / one['wall']:.2f} / {many['server'] / many['wall']:.2f} cores "
          f"(one process / processes); clients {one['cpu'] / one['wall']:.2f} / "
          f"{many['cpu'] / many['wall']:.2f} cores")


def memory(events: int) -> dict:
    code = ("import asyncio, json, resource, sys, tempfile, time\nfrom pathlib import Path\n"
            "from intellagent.environment import load_environment\nfrom intellagent.plan import load_plan\n"
            "from intellagent.registry import load_registry\nfrom intellagent.runner import run_plan\n"
            "from intellagent.store import Store\n"
            "reg = load_registry(); env = load_environment(reg.resolve('environment', 'airline').value)\n"
            f"plan = load_plan(None, reg, params={{'events': '{events}'}})\n"
            "with tempfile.TemporaryDirectory() as tmp:\n"
            "    t = time.perf_counter()\n"
            "    r = asyncio.run(run_plan(plan, env, store=Store.for_workspace(tmp), registry=reg,"
            " workspace=Path(tmp), progress_stream=open('/dev/null', 'w')))\n"
            "    peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
            "    html = next(Path(tmp).glob('runs/*/report.html')); pages = list(html.parent.glob('items/*.html'))\n"
            "    print(json.dumps({'wall': time.perf_counter() - t, 'items': sum(r.report.outcomes.values()),"
            " 'rss': peak / 1024, 'html_mb': html.stat().st_size / 1e6, 'pages': len(pages),"
            " 'page_mb': max((p.stat().st_size for p in pages), default=0) / 1e6}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=7200)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_figures(small: int, large: int) -> None:
    a, b = memory(small), memory(large)
    print(f"3. peak RSS on mock/schema (default concurrency): {a['rss']:.0f} MB at {a['items']} events "
          f"({a['wall']:.0f} s), {b['rss']:.0f} MB at {b['items']} events ({b['wall']:.0f} s); "
          f"ratio {b['rss'] / a['rss']:.2f} (flat = close to 1; target < 400 MB at 10,000); at "
          f"{b['items']} events report.html is {b['html_mb']:.1f} MB, with {b['pages']} item pages of "
          f"at most {b['page_mb']:.1f} MB")


def resume_figure() -> None:
    """A run stopped by its budget again and again (the budget raised a little each time) until
    it finishes: how many report folders its attempts wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-m", "intellagent", "run", "airline", "--events", "6", "--workspace", tmp,
                "--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}"]
        stops = 0
        for attempt in range(1, 41):
            out = subprocess.run(args + ["--budget", f"{0.2 * attempt:.1f}"], capture_output=True,
                                 text=True, timeout=600)
            if out.returncode not in (0, 3):  # 3: stopped by the budget (or another stop)
                raise SystemExit(f"the run exited {out.returncode}: {(out.stderr or out.stdout)[-2000:]}")
            if "budget-exhausted" not in out.stdout:
                break
            stops += 1
        folders = len(list(Path(tmp, "runs").iterdir()))
    print(f"4. resume: a run stopped {stops} times by its budget, then finished: {folders} report "
          "folder(s) written (target 1; --new-report asks for another)")


def host_reference(rounds: int = 5) -> float:
    """Milliseconds this machine takes for a fixed piece of pure-Python work (dicts, strings,
    JSON), the median of ``rounds``: the CPU figures scale with it, and on a shared VM it moves
    from hour to hour (2× and more), so a figure is compared with another at the same reference."""
    record = {"id": "R1", "user": {"name": "Ana", "tags": ["a", "b"]},
              "dates": {str(d): {"seats": d, "price": d * 3.5} for d in range(30)}}
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for i in range(400):
            text = json.dumps(record, sort_keys=True)
            copy = json.loads(text)
            copy["id"] = f"R{i}"
            sum(len(k) + len(str(v)) for k, v in copy["dates"].items())
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--throughput-events", type=int, default=1500)
    parser.add_argument("--wide", type=int, default=128)
    parser.add_argument("--memory-events", type=int, default=10000)
    parser.add_argument("--memory-small", type=int, default=2000)
    parser.add_argument("--port", type=int, default=47613,
                        help="The test server's port (0: a free one). The base URL is part of the "
                             "model's identity, so the port shapes the events: with the same port, "
                             "two runs make the same calls, and figures compare call for call.")
    parser.add_argument("--no-pin", action="store_true",
                        help="Section 1: leave the client and the test server on the same cores "
                             "(by default the server gets a core of its own, as an endpoint on "
                             "another machine would)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["cpu", "throughput", "memory", "resume"])
    args = parser.parse_args()
    reference = host_reference()
    print(f"0. host reference (fixed pure-Python work, median of 5): {reference:.1f} ms; the CPU "
          "figures below scale with it")
    if "cpu" not in args.skip:
        drive(one_process(args.events, args.latency, args.in_flight, args.port, pin=not args.no_pin))  # on the CLI's loop
        after = host_reference()
        moved = after / reference - 1
        print(f"   host reference right after it: {after:.1f} ms (before it: {reference:.1f} ms)"
              + (f"; the machine ran {abs(moved):.0%} {'slower' if moved > 0 else 'faster'} at its "
                 "end than at its start: a CPU figure of a machine whose speed changed during the "
                 "run, to be measured again" if abs(moved) > 0.15 else ""))
    if "throughput" not in args.skip:
        throughput(args.throughput_events, args.latency, args.wide, args.port)
    if "memory" not in args.skip:
        memory_figures(args.memory_small, args.memory_events)
    if "resume" not in args.skip:
        resume_figure()
    print(f"   host reference at the end: {host_reference():.1f} ms (at the start: {reference:.1f} ms)")


if __name__ == "__main__":
    main()
