"""Benchmark of the LLM layer against the local OpenAI-compatible server (no network).

    python bench/llm_bench.py [--calls 2000] [--overhead-calls 400]

Prints three figures:
1. overhead: median per-call time of ``LLM.structured`` minus that of a bare ``openai`` call
   with the same payload, at zero server latency, calls made one after another (target < 2 ms);
2. throughput: N structured calls at 200 ms server latency with 64 in flight, against the ideal
   N × 0.2 / 64 s (target: within 10 %);
3. faults: the same N calls with 20 % injected faults: every call ends answered or with an
   infra-error status, and the store holds exactly one row per call (none lost or duplicated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai
from pydantic import BaseModel, Field

from intellagent.llm import LLM, Status
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.store import Store
from intellagent.testing.openai_server import OpenAIServer


class Policy(BaseModel):
    name: str
    category: str
    challenge: int = Field(ge=1, le=5)


class Extracted(BaseModel):
    policies: list[Policy] = Field(min_length=1, max_length=3)


def messages(i: int) -> list[dict]:
    return [{"role": "system", "content": "Extract the policies."},
            {"role": "user", "content": f"Policy document number {i}."}]


class ServerProcess:
    """The test server in its own process, so its CPU time is not charged to the client."""

    def __init__(self, **options: float) -> None:
        args = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
        self.proc = subprocess.Popen([sys.executable, "-m", "intellagent.testing.openai_server", *args],
                                     stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url:  # it printed its error on stderr
            self.proc.wait(10)
            raise SystemExit(f"the test server did not start ({' '.join(args)}); a port in use? "
                             "--port 0 takes a free one")
        self.stats: dict = {}

    def cpu(self) -> float:
        """The server process's CPU seconds so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        out = self.proc.stdout.read().strip().splitlines()
        self.proc.wait(10)
        self.stats = json.loads(out[-1]) if out else {}


@contextlib.contextmanager
def server_process(**options: float):
    server = ServerProcess(**options)
    try:
        yield server
    finally:
        server.close()


def make_llm(server, store: Store, run_id: str, **limits) -> LLM:
    model = ModelSettings(model="gpt-4o-mini", base_url=server.base_url, timeout=limits.pop("timeout", 30))
    return LLM(LLMSettings(default=model, **limits), store=store, run_id=run_id)


def bare_client(base_url: str) -> openai.AsyncOpenAI:
    """A plain openai client on the same HTTP transport our provider uses."""
    http = openai.DefaultAioHttpClient() if hasattr(openai, "DefaultAioHttpClient") else None
    return openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0,
                              **({"http_client": http} if http else {}))


async def captured_payload() -> dict:
    """The exact request instructor sends for one structured call."""
    with OpenAIServer() as recorder:
        probe = make_llm(recorder, Store.in_memory(), "probe")
        await probe.structured(messages(-1), Extracted)
        await probe.aclose()
        return dict(recorder.requests[-1])


async def bare_burst(calls: int, latency: float, in_flight: int) -> float:
    """The same load through a bare openai client: what the library itself allows here."""
    payload = await captured_payload()
    with server_process(latency=latency) as server:
        bare = bare_client(server.base_url)
        slots = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with slots:
                await bare.chat.completions.create(**payload)

        started = time.perf_counter()
        await asyncio.gather(*[one() for _ in range(calls)])
        wall = time.perf_counter() - started
        await bare.close()
    return wall


async def overhead(calls: int) -> tuple[float, float]:
    payload = await captured_payload()
    with server_process() as server, tempfile.TemporaryDirectory() as tmp:
        store = Store.for_workspace(tmp)
        llm = make_llm(server, store, store.start_run())  # cache on, as in a real run
        await llm.structured(messages(-1), Extracted)  # warm up both clients
        bare = bare_client(server.base_url)
        await bare.chat.completions.create(**payload)
        ours, theirs = [], []
        for i in range(calls):  # interleaved, so drift on the machine hits both alike
            started = time.perf_counter()
            await bare.chat.completions.create(**payload)
            theirs.append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = await llm.structured(messages(i), Extracted)  # distinct: no cache hits
            ours.append(time.perf_counter() - started)
            assert outcome.ok, outcome.error
        await bare.close()
        await llm.aclose()
        return statistics.median(ours) * 1000, statistics.median(theirs) * 1000


async def burst(calls: int, latency: float, in_flight: int, fault_rate: float) -> dict:
    with server_process(latency=latency, fault_rate=fault_rate, retry_after=0.05, timeout_hang=5,
                        seed=11) as server, tempfile.TemporaryDirectory() as tmp:
        store = Store.for_workspace(tmp)
        run_id = store.start_run()
        llm = make_llm(server, store, run_id, max_concurrency=in_flight, backoff_base=0.05,
                       max_retries=5, timeout=1.0 if fault_rate else 30)
        started = time.perf_counter()
        outcomes = await asyncio.gather(*[llm.structured(messages(i), Extracted, stage="bench")
                                          for i in range(calls)])
        wall = time.perf_counter() - started
        await llm.aclose()
        rows = store.calls(run_id)
    return {
        "wall": wall, "ok": sum(o.status is Status.ok for o in outcomes),
        "infra": sum(o.status is Status.infra_error for o in outcomes),
        "rows": len(rows), "distinct_rows": len({r.request_hash for r in rows}),
        **server.stats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--overhead-calls", type=int, default=400)
    args = parser.parse_args()

    ours, bare = asyncio.run(overhead(args.overhead_calls))
    print(f"1. overhead: median {ours:.2f} ms per structured call through LLM vs {bare:.2f} ms bare "
          f"openai with the same payload -> {ours - bare:.2f} ms overhead "
          f"({args.overhead_calls} sequential calls, zero latency; target < 2 ms)")

    ideal = args.calls * 0.2 / 64
    t = asyncio.run(burst(args.calls, 0.2, 64, 0.0))
    bare_wall = asyncio.run(bare_burst(args.calls, 0.2, 64))
    print(f"2. throughput: {args.calls} calls at 200 ms, 64 in flight: {t['wall']:.2f} s vs ideal "
          f"{ideal:.2f} s -> {100 * (t['wall'] / ideal - 1):+.1f} % (target <= +10 %); "
          f"ok {t['ok']}, max in flight {t['max_in_flight']}; a bare openai client under the "
          f"same load: {bare_wall:.2f} s ({100 * (bare_wall / ideal - 1):+.1f} %)")

    f = asyncio.run(burst(args.calls, 0.2, 64, 0.2))
    lost = args.calls - f["ok"] - f["infra"]
    print(f"3. faults: {args.calls} calls, 20 % faults {f['faults']}: answered {f['ok']}, "
          f"infra-error {f['infra']}, lost {lost}; store rows {f['rows']} "
          f"({f['distinct_rows']} distinct requests, duplicates {f['rows'] - f['distinct_rows']}); "
          f"{f['requests']} HTTP requests; wall {f['wall']:.2f} s")


if __name__ == "__main__":
    main()
