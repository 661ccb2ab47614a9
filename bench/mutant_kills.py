"""τ-bench's tasks with the oracle agent and each built-in mutant: what the tasks' state check
catches. Reads ../shared/datasets/tau-bench (τ-bench's data and tasks); runs offline on mock
models.

    python bench/mutant_kills.py [--mutants drop-writes,wrong-record,...]

For each split: the tasks whose ground truth changes the database ("write", from τ-bench's
golden end states) and those that do not, then per mutant the items killed among each, the kill
rate, and the wall time of `intellagent mutate`. The drop-writes line is the deterministic check:
it kills every task that writes and none that does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAU = REPO.parent / "shared" / "datasets" / "tau-bench"
SPLITS = (("airline", "test"), ("retail", "test"), ("retail", "dev"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mutants", default="drop-writes,wrong-record,skip-lookup,leak,refuse-all")
    args = parser.parse_args()
    for domain, split in SPLITS:
        golden = json.loads((TAU / domain / f"golden_{split}.json").read_text())["tasks"]
        writes = {f"T{t['task']:03d}-0" for t in golden if not t["db_unchanged"]}
        reads = {f"T{t['task']:03d}-0" for t in golden} - writes
        with tempfile.TemporaryDirectory() as ws:
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "intellagent", "mutate", domain, "--pipeline", "tau-bench",
                 "--data", str(TAU / domain), "--tasks", f"tasks_{split}.json", "--agent", "tau-bench/oracle",
                 "--mutants", args.mutants, "--workspace", ws, "--json"],
                capture_output=True, text=True, cwd=REPO)
            seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"{domain} {split}: mutate failed: {done.stderr[-2000:]}")
        found = json.loads(done.stdout)
        print(f"τ-bench {domain} {split}: {len(golden)} tasks, {len(writes)} write, {len(reads)} do not "
              f"(mutate with {len(found)} mutant(s): {seconds:.1f} s)")
        for name, result in found.items():
            killed = set(result["killed"])
            rate = "–" if result["kill_rate"] is None else f"{result['kill_rate']:.0%}"
            print(f"  {name:<13} killed {len(killed):>3}: {len(killed & writes):>3}/{len(writes)} tasks that "
                  f"write, {len(killed & reads):>3}/{len(reads)} that do not; kill rate {rate} "
                  f"[{result['low']:.0%}, {result['high']:.0%}]")


if __name__ == "__main__":
    main()
