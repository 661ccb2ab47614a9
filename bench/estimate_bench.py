"""`intellagent run --estimate` against what the run then spends: the quickstart pipeline
(airline) on the local OpenAI-compatible test server, at three sizes.

    python bench/estimate_bench.py [--sizes 10 30 100] [--pilot 5] [--seeds 0 1 2] [--port 47615] [--latency 0.02]

Per size, two workspaces:
- cold: nothing in the workspace; the estimate is the steps' own guesses from the pipeline and
  the environment;
- after a pilot: a run of ``--pilot`` events first, then the estimate (refined by the pilot's
  figures per item, and counting what the store already holds as reused), then the run.
Actual figures are the run's model calls that reached the server (cache hits excluded) and the
tokens the server reported. The target is within ±25 % on calls and on tokens. Last, whether the
calls the run made fell within the range the estimate gives them after the pilot (95 %, from how
much the pilot's items varied), and the wall time of each run (the command's whole process, from
its start to its exit) against the range the estimate gave it.

The point figure after a pilot is a sample: the pilot's few dialogs stand for all the others, so
it moves with the run seed (``--seeds``: one table per seed, then the spread over them). The
test server's answers follow each request's seed, which is derived from the endpoint too: the
server listens on a fixed ``--port`` so that the same seed gives the same figures.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from intellagent.testing.openai_server import OpenAIServer  # noqa: E402

TOTAL = re.compile(r"total: (\d+) calls, (\d+) prompt \+ (\d+) completion tokens")
LIKELY = re.compile(r"likely (\d+) to (\d+) calls")
DURATION = r"([\d.]+) (s|min|h)"
WALL = re.compile(rf"; wall {DURATION} to {DURATION}")
UNIT = {"s": 1, "min": 60, "h": 3600}


def cli(workspace: Path, base_url: str, events: int, *extra: str, seed: int = 0) -> tuple[str, float]:
    """The command's output, and the seconds its process took."""
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "intellagent", "run", "airline", "--events", str(events), "--seed", str(seed),
         "--workspace", str(workspace), "--set", f"llm.default={{model: gpt-4o-mini, base_url: '{base_url}'}}",
         *extra], capture_output=True, text=True, timeout=1800, cwd=REPO,
        env={**os.environ, "OPENAI_API_KEY": "test"})
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr or out.stdout)
    return out.stdout, time.monotonic() - started


def estimate(workspace: Path, base_url: str, events: int, seed: int) \
        -> tuple[int, int, tuple[int, int] | None, tuple[float, float]]:
    """The estimate's calls and tokens, the range it gives the calls (None without one), and
    its wall time's range in seconds."""
    text, _ = cli(workspace, base_url, events, "--estimate", seed=seed)
    found = TOTAL.search(text)
    assert found, "no total line in the estimate"
    calls, prompt, completion = map(int, found.groups())
    likely = LIKELY.search(text)
    wall = WALL.search(text)
    assert wall, "no wall time in the estimate"
    low, high = float(wall[1]) * UNIT[wall[2]], float(wall[3]) * UNIT[wall[4]]
    return calls, prompt + completion, (int(likely[1]), int(likely[2])) if likely else None, (low, high)


def actual(workspace: Path) -> tuple[int, int]:
    """The latest run's calls that reached the server, and their tokens."""
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        calls, tokens = conn.execute(
            "SELECT count(*), coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_calls "
            "WHERE run_id = ? AND cached = 0", (run_id,)).fetchone()
    return calls, tokens


def measure(sizes: list[int], pilot: int, seed: int, port: int, latency: float) -> list[dict]:
    rows = []
    with OpenAIServer(latency=latency, keep_requests=False, port=port) as server, tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            cold = Path(tmp) / f"cold-{n}"
            guess = estimate(cold, server.base_url, n, seed)
            _, cold_wall = cli(cold, server.base_url, n, seed=seed)
            got = actual(cold)
            piloted = Path(tmp) / f"pilot-{n}"
            cli(piloted, server.base_url, pilot, seed=seed)
            refined = estimate(piloted, server.base_url, n, seed)
            _, wall = cli(piloted, server.base_url, n, seed=seed)
            rows.append({"events": n, "cold": guess, "cold_actual": got, "cold_wall": cold_wall,
                         "refined": refined, "refined_actual": actual(piloted), "wall": wall})
    return rows


def report(rows: list[dict], pilot: int, seed: int) -> tuple[float, int, int]:
    """Print one seed's table; its worst deviation after the pilot, and of its sizes, those
    whose calls fell in the estimate's range and those with a range."""
    print(f"seed {seed}: estimate / actual (airline, test server; calls, tokens = prompt + completion)")
    print(f"{'events':>6}  {'cold: calls':>22}  {'tokens':>26}  {'after a pilot: calls':>22}  {'tokens':>26}")
    worst = 0.0
    for r in rows:
        cells = []
        for est, got in ((r["cold"], r["cold_actual"]), (r["refined"], r["refined_actual"])):
            for i in (0, 1):
                ratio = est[i] / got[i] if got[i] else float("inf")
                cells.append(f"{est[i]:>9,}/{got[i]:>9,} {ratio:>4.2f}")
            worst = max(worst, *(abs(est[i] / got[i] - 1) for i in (0, 1) if got[i])) \
                if est is r["refined"] else worst
        print(f"{r['events']:>6}  " + "  ".join(cells))
    print(f"after a pilot of {pilot} events: worst deviation {worst:.0%} (target 25 %)")
    ranges = [(r["refined"][2], r["refined_actual"][0]) for r in rows if r["refined"][2]]
    inside = sum(lo <= got <= hi for (lo, hi), got in ranges)
    print(f"the calls the run made fell within the estimate's 95 % range in {inside} "
          f"of {len(ranges)} sizes (" + ", ".join(f"{got:,} in {lo:,}-{hi:,}" for (lo, hi), got in ranges) + ")")
    walls = [(r["cold"][3], r["cold_wall"]) for r in rows] + [(r["refined"][3], r["wall"]) for r in rows]
    held = sum(lo <= took <= hi for (lo, hi), took in walls)
    print("wall time (the command's process), estimated / taken: cold " + ", ".join(
        f"{r['events']} events {r['cold'][3][0]:.1f}-{r['cold'][3][1]:.1f} s / {r['cold_wall']:.1f} s" for r in rows)
          + "; after the pilot " + ", ".join(
        f"{r['events']} events {r['refined'][3][0]:.1f}-{r['refined'][3][1]:.1f} s / {r['wall']:.1f} s" for r in rows)
          + f"; {held} of {len(walls)} within the range")
    return worst, inside, len(ranges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--pilot", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="Run seeds, one table each.")
    parser.add_argument("--port", type=int, default=47615, help="The test server's port (part of each "
                        "request's seed, so fixed for figures that repeat).")
    parser.add_argument("--latency", type=float, default=0.02, help="Seconds the test server takes to answer.")
    args = parser.parse_args()
    found = []
    for seed in args.seeds:
        found.append(report(measure(args.sizes, args.pilot, seed, args.port, args.latency), args.pilot, seed))
    if len(found) > 1:
        worst = sorted(w for w, _, _ in found)
        print(f"over {len(found)} seeds: worst deviation after the pilot, median {statistics.median(worst):.0%}, "
              f"largest {worst[-1]:.0%} ({sum(w <= 0.25 for w in worst)} of {len(worst)} seeds within 25 %); "
              f"calls within the 95 % range in {sum(i for _, i, _ in found)} of {sum(n for _, _, n in found)} sizes")


if __name__ == "__main__":
    main()
