"""`intellagent run --estimate` against what the run then sends, for every built-in pipeline: a
small run of each, cold (nothing in the workspace) and after a smaller pilot run.

    python bench/estimate_pipelines_bench.py [PIPELINE ...]

The model is the local OpenAI-compatible test server (gpt-4o-mini's name, so it is priced) where
its fabricated answers get through a pipeline's checks; ALMITA, APIGen-MT and tooltalk-generate
reject what it writes (flowgraphs, blueprints, conversations whose calls fail), so they also run
on the `mock/function` models of the tests that write valid ones (tests/almita_script.py,
tests/test_estimate.py's APIGen-MT user, tests/tooltalk_writer.py). Per step: the items (made
and reused), the model calls that reached the model and their tokens, estimate / actual.
τ-bench needs its airline data in ../shared/datasets/tau-bench/airline.
"""

from __future__ import annotations

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

ROW = re.compile(r"^\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.*)$")
TAU = REPO.parent / "shared" / "datasets" / "tau-bench" / "airline"
SERVER = "server"  # replaced by the test server's model settings
ALMITA = ["--model", "mock/function", "--set", "llm.default.options.function=tests.almita_script:answer"]
APIGEN = ["--set", "llm.default.model=mock/function", "--set",
          "llm.default.options.function=tests.test_estimate:distinct_candidates",
          "--set", "steps.contexts.with.user_pool=2"]
WRITER = ["--set", "llm.default.model=mock/function", "--set", "llm.default.options.function=tests.tooltalk_writer:reply",
          "--agent", "tooltalk/oracle"]
TASKS = "steps.tasks.with.indices=[{}]"

#: name: (the run's arguments, the pilot's)
CASES = {
    "intellagent": (["airline", "--events", "10", SERVER], ["airline", "--events", "5", SERVER]),
    "tau-bench": (["airline", "--pipeline", "tau-bench", "--data", str(TAU), "--set", TASKS.format(",".join(map(str, range(10)))), SERVER],
                  ["airline", "--pipeline", "tau-bench", "--data", str(TAU), "--set", TASKS.format("0,1,2,3"), SERVER]),
    "tooltalk": (["tooltalk", "--pipeline", "tooltalk", "--sets", "[easy]", "--set", "steps.conversations.with.limit=8", SERVER],
                 ["tooltalk", "--pipeline", "tooltalk", "--sets", "[easy]", "--set", "steps.conversations.with.limit=3", SERVER]),
    "tooltalk-generate": (["tooltalk", "--pipeline", "tooltalk-generate", "--requests", "4", SERVER],
                          ["tooltalk", "--pipeline", "tooltalk-generate", "--requests", "2", SERVER]),
    "tooltalk-generate/writer": (["tooltalk", "--pipeline", "tooltalk-generate", "--requests", "4", *WRITER],
                                 ["tooltalk", "--pipeline", "tooltalk-generate", "--requests", "2", *WRITER]),
    "almita/script": (["almita", "--pipeline", "almita", "--paths", "2", *ALMITA],
                      ["almita", "--pipeline", "almita", "--paths", "1", *ALMITA]),
    "apigen-mt/script": (["retail", "--pipeline", "apigen-mt", "--blueprints", "6", "--pairs", "2", "--trials", "2", *APIGEN],
                         ["retail", "--pipeline", "apigen-mt", "--blueprints", "2", "--pairs", "1", "--trials", "2", *APIGEN]),
}


def cli(workspace: Path, base_url: str, args: list[str], *extra: str) -> str:
    model = ["--set", f"llm.default={{model: gpt-4o-mini, base_url: '{base_url}'}}"]
    args = [a for part in args for a in (model if part == SERVER else [part])]
    out = subprocess.run([sys.executable, "-m", "intellagent", "run", *args, "--workspace", str(workspace), *extra],
                         capture_output=True, text=True, timeout=1800, cwd=REPO,
                         env={**os.environ, "OPENAI_API_KEY": "test"})
    if out.returncode not in (0, 1, 3):
        raise SystemExit(out.stderr or out.stdout)
    return out.stdout


def estimate(workspace: Path, base_url: str, args: list[str]) -> dict[str, tuple[int, int, int]]:
    """Per step: items (to make and reused), calls, tokens."""
    text = cli(workspace, base_url, args, "--estimate")
    return {m[1]: (int(m[2]) + int(m[3]), int(m[4]), int(m[5]) + int(m[6]))
            for line in text.splitlines() if (m := ROW.match(line))}


def actual(workspace: Path) -> dict[str, tuple[int, int, int]]:
    """Per step of the latest run: its items, the calls that reached the model, their tokens."""
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        run_id, = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
        items = dict(conn.execute("SELECT step, count(*) FROM run_items WHERE run_id = ? GROUP BY step", (run_id,)))
        calls = {s: (n, t) for s, n, t in conn.execute(
            "SELECT stage, count(*), coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_calls "
            "WHERE run_id = ? AND cached = 0 GROUP BY stage", (run_id,))}
    return {s: (n, *calls.get(s, (0, 0))) for s, n in items.items()}


def show(label: str, est: dict, got: dict) -> None:
    def cell(e: int, a: int) -> str:
        return f"{e:>8,}/{a:<8,} " + (f"{e / a:5.2f}" if a else ("    -" if not e else "  inf"))

    print(f"  {label}: {'step':<14} {'items est/actual':>17} {'calls est/actual':>23} {'tokens est/actual':>27}")
    totals = [0, 0, 0, 0]
    for step, (items, calls, tokens) in est.items():
        n, c, t = got.get(step, (0, 0, 0))
        print(f"    {step:<24} {items:>7}/{n:<7} {cell(calls, c)} {cell(tokens, t)}")
        totals = [totals[0] + calls, totals[1] + c, totals[2] + tokens, totals[3] + t]
    print(f"    {'total':<24} {'':15} {cell(totals[0], totals[1])} {cell(totals[2], totals[3])}")


def main() -> None:
    names = sys.argv[1:] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown case {unknown[0]!r} (cases: {', '.join(CASES)})")
    with OpenAIServer(keep_requests=False) as server, tempfile.TemporaryDirectory() as tmp:
        for name in names:
            run, pilot = CASES[name]
            if "tau-bench" in run and not TAU.is_dir():
                print(f"{name}: skipped ({TAU} not present)")
                continue
            print(f"{name}: {' '.join(a for a in run if a != SERVER)}")
            cold = Path(tmp) / f"{name.replace('/', '-')}-cold"
            guess = estimate(cold, server.base_url, run)
            cli(cold, server.base_url, run)
            show("cold", guess, actual(cold))
            piloted = Path(tmp) / f"{name.replace('/', '-')}-pilot"
            cli(piloted, server.base_url, pilot)
            guess = estimate(piloted, server.base_url, run)
            cli(piloted, server.base_url, run)
            changed = [f"{a} {b}" for a, b in zip(pilot, pilot[1:]) if a.startswith("--") and a != "--set" and a in run
                       and run[run.index(a) + 1] != b] + [b for a, b in zip(pilot, pilot[1:])
                                                          if a == "--set" and b not in run]
            show("after a pilot (" + ", ".join(changed) + ")", guess, actual(piloted))


if __name__ == "__main__":
    main()
