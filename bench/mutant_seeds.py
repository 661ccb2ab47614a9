"""Kill rates over several seeds, offline.

    python bench/mutant_seeds.py [--seeds 5] [--events 30]

1. τ-bench with the oracle (retail dev, airline test; reads ../shared/datasets/tau-bench): the
   seed drives only the mutants' own choices (wrong-record's other record, leak's other
   customer), so every mutant should kill the same tasks under every seed.
2. The IntellAgent pipeline on airline and retail with `mock/schema` for every role: the judge's
   verdicts are fabricated from a hash of what it is asked, so a mutant "kills" an item exactly
   when its fault changes the dialog and the redrawn verdict happens to fail. Per mutant, pooled
   over the seeds: items that pass with the agent, those whose dialog the fault changed, and the
   kills among each. This is the chance floor a real judge must beat, not a measure of a suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAU = REPO.parent / "shared" / "datasets" / "tau-bench"
sys.path.insert(0, str(REPO))

from intellagent.metrics import Rate  # noqa: E402


def mutate(args: list[str], workspace: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "intellagent", "mutate", *args, "--workspace", workspace, "--json"],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"mutate {' '.join(args)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def dialogs(workspace: str, run_id: str) -> dict[str, tuple]:
    """Each dialog as its judge sees it: the turns (tool calls and results) and the database diff."""
    from intellagent_plugins.reporters.writers import read_report

    report = read_report(Path(workspace) / "runs" / run_id / "report.json")
    return {i["item"]: (i["value"]["turns"], i["value"].get("db_diff")) for i in report["items"]
            if i["step"] == "dialogs" and i["value"]}


def baseline(workspace: str) -> str:
    return next(p.parent.name for p in Path(workspace).glob("runs/*/report.json")
                if json.loads(p.read_text()).get("mutation"))


def tau_bench(seeds: int) -> None:
    for domain, split in (("retail", "dev"), ("airline", "test")):
        killed: dict[str, list[frozenset]] = {}
        for seed in range(seeds):
            with tempfile.TemporaryDirectory() as ws:
                found = mutate([domain, "--pipeline", "tau-bench", "--data", str(TAU / domain), "--tasks",
                                f"tasks_{split}.json", "--agent", "tau-bench/oracle", "--seed", str(seed)], ws)
            for name, result in found.items():
                killed.setdefault(name, []).append(frozenset(result["killed"]))
        print(f"τ-bench {domain} {split}, oracle, seeds 0–{seeds - 1}:")
        for name, sets in killed.items():
            same = "the same tasks under every seed" if len(set(sets)) == 1 else "DIFFERENT tasks across seeds"
            print(f"  {name:<13} killed {min(map(len, sets))}–{max(map(len, sets))}: {same}")


def intellagent(seeds: int, events: int) -> None:
    for env in ("airline", "retail"):
        pooled: dict[str, dict[str, int]] = {}
        for seed in range(seeds):
            with tempfile.TemporaryDirectory() as ws:
                found = mutate([env, "--events", str(events), "--model", "mock/schema", "--seed", str(seed)], ws)
                base = dialogs(ws, baseline(ws))
                for name, result in found.items():
                    mutated = dialogs(ws, result["run_id"])
                    counts = pooled.setdefault(name, {"n": 0, "killed": 0, "changed": 0, "killed_changed": 0})
                    for item in [*result["killed"], *result["survived"]]:
                        changed = mutated.get(item) != base.get(item)
                        counts["n"] += 1
                        counts["changed"] += changed
                        counts["killed"] += item in result["killed"]
                        counts["killed_changed"] += changed and item in result["killed"]
        passing = next(iter(pooled.values()))["n"] if pooled else 0
        print(f"IntellAgent pipeline, {env}, {events} events × seeds 0–{seeds - 1}, mock/schema: "
              f"{passing} item(s) pass with the agent itself")
        for name, c in pooled.items():
            unchanged = c["n"] - c["changed"]
            print(f"  {name:<13} kill rate {Rate.of(c['killed'], c['n']).text()}; the fault changed "
                  f"{c['changed']}/{c['n']} dialogs, killing {c['killed_changed']} of them "
                  f"({Rate.of(c['killed_changed'], c['changed']).text()}), "
                  f"{c['killed'] - c['killed_changed']} of the {unchanged} unchanged")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--skip-tau", action="store_true")
    args = parser.parse_args()
    if not args.skip_tau:
        tau_bench(args.seeds)
    intellagent(args.seeds, args.events)


if __name__ == "__main__":
    main()
