"""Figures of the IntellAgent method on the mock model (no network).

    python bench/method_figures.py

1. Event-invalid rate per environment over seeds 0–4 × 30 events (target ≤ 3 %).
2. Policy inclusion per challenge level on the 30-policy test graph, 4,000 events: the
   weighted walk (Algorithm 1) against walking only among policies that fit the target.
3. Verdict counts by status for the README's quickstart run (airline, 30 events, mock/schema).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def intellagent(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "intellagent", *args], capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return out.stdout


def statuses(workspace: Path, step: str) -> Counter:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return Counter(s for s, in conn.execute("SELECT status FROM run_items WHERE step = ?", (step,)))


def invalid_rates() -> None:
    print("1. event-invalid rate on mock/schema, seeds 0-4 x 30 events")
    for env in ("airline", "retail"):
        counts: Counter = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(5):
                ws = Path(tmp) / str(seed)
                intellagent("run", env, "--events", "30", "--seed", str(seed), "--until", "events",
                            "--workspace", str(ws))
                counts += statuses(ws, "events")
        total = sum(counts.values())
        print(f"   {env}: {counts['invalid']}/{total} invalid ({counts['invalid'] / total:.1%}); {dict(counts)}")


def inclusion() -> None:
    from intellagent.environment import load_environment
    from intellagent.testing.harness import step_context
    from intellagent_plugins.intellagent.sampler import Config, MaxWalk, WeightedWalk
    from tests.test_sampler import graph, inclusion_by_level

    g = graph()
    ctx = step_context(load_environment(REPO / "environments" / "education"), seed=11)
    print("2. inclusions per policy per event by challenge level (30-policy graph, 4,000 events)")
    for label, sampler in (("weighted-walk (Algorithm 1)", WeightedWalk),
                           ("fit-the-target walk (max-walk's rule)", MaxWalk)):
        levels = inclusion_by_level(g, sampler(Config(events=4000, complexity=(2, 11))).run(ctx, g))
        ratio = max(levels.values()) / min(levels.values())
        print(f"   {label}: " + ", ".join(f"{k}: {v:.3f}" for k, v in levels.items())
              + f"; max/min {ratio:.2f}")


def quickstart() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        out = intellagent("run", "airline", "--events", "30", "--model", "mock/schema", "--workspace", str(ws))
        print("3. quickstart run (airline, 30 events, mock/schema):")
        print("   " + out.splitlines()[0])
        print(f"   events: {dict(statuses(ws, 'events'))}; verdicts: {dict(statuses(ws, 'verdicts'))}")


if __name__ == "__main__":
    invalid_rates()
    inclusion()
    quickstart()
