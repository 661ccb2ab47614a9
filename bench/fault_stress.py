"""Runs under injected faults: none may crash, transient faults are never called permanent.

    python bench/fault_stress.py [--runs 100] [--events 3]

Against the local OpenAI-compatible server (every role on it) with 20 % and then 40 % of the
requests faulted (429 with Retry-After, 500, 503, connection reset, timeout, malformed JSON,
JSON that breaks the response model), ``--runs`` runs of the IntellAgent pipeline each, cycling
over the three built-in environments. Prints crashed / completed / budget runs, and the items
that ended as infra errors. Then a phase with transient faults only (no schema-breaking JSON) at
40 %: every call that still failed must have failed with a transient kind; the count of calls
classified as permanent (invalid-output, rejected) must be 0.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from intellagent.environment import load_environment  # noqa: E402
from intellagent.registry import load_registry  # noqa: E402
from intellagent.testing.harness import run_pipeline  # noqa: E402
from intellagent.testing.openai_server import FAULTS, OpenAIServer  # noqa: E402

ENVS = ("airline", "retail", "education")
TRANSIENT = tuple(f for f in FAULTS if f != "invalid")


def phase(label: str, runs: int, events: int, rate: float, kinds: tuple[str, ...]) -> Counter:
    registry = load_registry()
    envs = {name: load_environment(registry.resolve("environment", name).value) for name in ENVS}
    tally: Counter = Counter()
    permanent: Counter = Counter()
    started = time.perf_counter()
    with OpenAIServer(fault_rate=rate, fault_kinds=kinds, timeout_hang=3.0, retry_after=0.01,
                      seed=int(rate * 100)) as server, tempfile.TemporaryDirectory() as tmp:
        overrides = [("llm.default", {"model": "gpt-4o-mini", "base_url": server.base_url}, "bench"),
                     ("llm.timeout", 1.0, "bench"), ("llm.backoff_base", 0.01, "bench"),
                     ("llm.backoff_max", 0.05, "bench"), ("llm.max_retries", 6, "bench"),
                     ("llm.max_concurrency", 8, "bench")]
        for i in range(runs):
            env = envs[ENVS[i % len(ENVS)]]
            ws = Path(tmp) / f"run{i}"
            try:
                result = run_pipeline("intellagent", env, workspace=ws, registry=registry,
                                      progress_stream=open("/dev/null", "w"),
                                      overrides=overrides + [("seed", i, "bench"),
                                                             ("steps.specs.with.events", events, "bench")])
            except Exception as exc:  # a crash: the whole point is that there is none
                tally["crashed"] += 1
                tally[f"crash: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                continue
            tally["completed"] += 1
            for item in result.data.items():
                if item.status == "infra-error":
                    tally["infra-error items"] += 1
            with sqlite3.connect(ws / "intellagent.db") as conn:
                for error, in conn.execute("SELECT error FROM llm_calls WHERE outcome = 'infra-error'"):
                    tally["failed calls"] += 1
                    kind = (error or "").split(":")[0]
                    if kind in ("invalid-output", "rejected"):
                        permanent[kind] += 1
                        if kinds == TRANSIENT and permanent[kind] <= 3:
                            print(f"   permanent: {error[:300]}")
                tally["calls"] += conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    seconds = time.perf_counter() - started
    print(f"{label}: {runs} runs at {rate:.0%} faults ({', '.join(kinds)}), {seconds:.0f} s")
    print(f"   crashed {tally['crashed']}, completed {tally['completed']}; {tally['calls']} calls, "
          f"{tally['failed calls']} failed after their retries; infra-error items {tally['infra-error items']}")
    for key, n in tally.items():
        if key.startswith("crash: "):
            print(f"   {n}× {key}")
    if kinds == TRANSIENT:
        print(f"   transient faults classified as permanent: {sum(permanent.values())} {dict(permanent)}")
    return tally


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--events", type=int, default=3)
    args = parser.parse_args()
    crashed = 0
    for rate in (0.2, 0.4):
        crashed += phase(f"all faults {rate:.0%}", args.runs, args.events, rate, FAULTS)["crashed"]
    phase("transient only 40%", max(10, args.runs // 5), args.events, 0.4, TRANSIENT)
    print(f"total crashed runs: {crashed}")


if __name__ == "__main__":
    main()
