"""`intellagent run --estimate` against what the run then spends: the quickstart pipeline
(airline) on the local OpenAI-compatible test server, at three sizes.

    python bench/estimate_bench.py [--sizes 10 30 100] [--pilot 5]

Per size, two workspaces:
- cold: nothing in the workspace; the estimate is the steps' own guesses from the pipeline and
  the environment;
- after a pilot: a run of ``--pilot`` events first, then the estimate (refined by the pilot's
  figures per item, and counting what the store already holds as reused), then the run.
Actual figures are the run's model calls that reached the server (cache hits excluded) and the
tokens the server reported. The target is within ±25 % on calls and on tokens. Last, whether the
calls the run made fell within the range the estimate gives them after the pilot (95 %, from how
much the pilot's items varied).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from intellagent.testing.openai_server import OpenAIServer  # noqa: E402

TOTAL = re.compile(r"total: (\d+) calls, (\d+) prompt \+ (\d+) completion tokens")
LIKELY = re.compile(r"likely (\d+) to (\d+) calls")


def cli(workspace: Path, base_url: str, events: int, *extra: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "intellagent", "run", "airline", "--events", str(events),
         "--workspace", str(workspace), "--set", f"llm.default={{model: gpt-4o-mini, base_url: '{base_url}'}}",
         *extra], capture_output=True, text=True, timeout=1800, cwd=REPO,
        env={**os.environ, "OPENAI_API_KEY": "test"})
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr or out.stdout)
    return out.stdout


def estimate(workspace: Path, base_url: str, events: int) -> tuple[int, int, tuple[int, int] | None]:
    """The estimate's calls and tokens, and the range it gives the calls (None without one)."""
    text = cli(workspace, base_url, events, "--estimate")
    found = TOTAL.search(text)
    assert found, "no total line in the estimate"
    calls, prompt, completion = map(int, found.groups())
    likely = LIKELY.search(text)
    return calls, prompt + completion, (int(likely[1]), int(likely[2])) if likely else None


def actual(workspace: Path) -> tuple[int, int]:
    """The latest run's calls that reached the server, and their tokens."""
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        calls, tokens = conn.execute(
            "SELECT count(*), coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_calls "
            "WHERE run_id = ? AND cached = 0", (run_id,)).fetchone()
    return calls, tokens


def measure(sizes: list[int], pilot: int) -> list[dict]:
    rows = []
    with OpenAIServer(latency=0.02, keep_requests=False) as server, tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            cold = Path(tmp) / f"cold-{n}"
            guess = estimate(cold, server.base_url, n)
            cli(cold, server.base_url, n)
            got = actual(cold)
            piloted = Path(tmp) / f"pilot-{n}"
            cli(piloted, server.base_url, pilot)
            refined = estimate(piloted, server.base_url, n)
            cli(piloted, server.base_url, n)
            rows.append({"events": n, "cold": guess, "cold_actual": got,
                         "refined": refined, "refined_actual": actual(piloted)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--pilot", type=int, default=5)
    args = parser.parse_args()
    rows = measure(args.sizes, args.pilot)
    print("estimate / actual (airline, test server; calls, tokens = prompt + completion)")
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
    print(f"after a pilot of {args.pilot} events: worst deviation {worst:.0%} (target 25 %)")
    ranges = [(r["refined"][2], r["refined_actual"][0]) for r in rows if r["refined"][2]]
    print(f"the calls the run made fell within the estimate's 95 % range in {sum(lo <= got <= hi for (lo, hi), got in ranges)} "
          f"of {len(ranges)} sizes (" + ", ".join(f"{got:,} in {lo:,}-{hi:,}" for (lo, hi), got in ranges) + ")")


if __name__ == "__main__":
    main()
