"""Verdicts that mean pass, on the quickstart's mock runs (no network, no key).

    python bench/verdict_figures.py [--seeds 5] [--events 30]

Runs the quickstart's pipeline (``intellagent run ENV --events N --seed S --model mock/schema``,
and the quickstart itself on ``mock/demo`` for README's sentence) on airline and retail for seeds 0 … S−1 and counts, per run, the events judged (an infra error
is not) and, for each of the two scores an event gets:

- the method's own score (``confirmed-stop``: the user's confirmed stop decides, as the paper
  and the original compute it; the headline before the verdict was made to mean pass);
- the headline (``event``: the confirmed stop is success, no exercised policy was judged
  violated, and the expected end state holds where the event has one);

how many events pass, and how many of those passes have a policy the judge found violated or a
failed end-state check. The headline must have none, and still some passes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


RATED = ("pass", "fail", "agent-error")  # the statuses the success rates count


@dataclass
class Passes:
    """Events passing one score, and the passes with a violated policy or a failed end state."""

    rated: int = 0  # passed or failed (not-exercised and simulator errors count apart)
    passed: int = 0
    violated: int = 0
    state_failed: int = 0

    def rate(self) -> str:
        return f"{self.passed / self.rated:.1%} ({self.passed}/{self.rated})" if self.rated else "–"

    @property
    def wrong(self) -> int:
        """Passes with a violated policy or a failed end state (counted once)."""
        return self.violated + self.state_failed


@dataclass
class RunCounts:
    environment: str
    seed: int
    judged: int = 0
    method: Passes = field(default_factory=Passes)
    headline: Passes = field(default_factory=Passes)
    failed_by: dict[str, int] = field(default_factory=dict)


def count(environment: str, seed: int, events: int = 30, model: str = "mock/schema") -> RunCounts:
    """One quickstart run on a mock model, counted (its store in a temporary folder)."""
    from intellagent.environment import load_environment
    from intellagent.envs import environment_path
    from intellagent.plan import model_overrides
    from intellagent.registry import load_registry
    from intellagent.store import Store
    from intellagent.testing.harness import run_pipeline

    registry = load_registry()
    env = load_environment(environment_path(registry, environment))
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as quiet:
        store = Store.for_workspace(Path(tmp))  # no reports are written: only the store
        result = run_pipeline("intellagent", env, registry=registry, store=store, progress_stream=quiet,
                              overrides=[("steps.specs.with.events", events, "--events"),
                                         ("seed", seed, "--seed"), *model_overrides(model)])
        verdicts = [v for _, v in result.data.values("verdicts")]
    out = RunCounts(environment, seed)
    for verdict in verdicts:
        if verdict.status == "infra-error":
            continue
        out.judged += 1
        violated = bool(verdict.violated)
        state_failed = verdict.state.status == "fail"
        # a verdict made before the method's score was kept apart has only the status
        method = getattr(verdict, "confirmed_stop", None) or verdict.status
        for passes, status in ((out.method, method), (out.headline, verdict.status)):
            passes.rated += status in RATED
            if status == "pass":
                passes.passed += 1
                passes.violated += violated
                passes.state_failed += state_failed and not violated
        for reason in getattr(verdict, "failed", []):
            out.failed_by[reason] = out.failed_by.get(reason, 0) + 1
    return out


def line(c: RunCounts) -> str:
    return (f"{c.environment:8} seed {c.seed}: judged {c.judged:3}; method's score (confirmed stop) "
            f"{c.method.rate()}: passes {c.method.passed:2}, of them {c.method.violated:2} with a violated policy and "
            f"{c.method.state_failed} more with a failed end state; headline {c.headline.rate()}: "
            f"passes {c.headline.passed:2}, of them {c.headline.violated} violated, "
            f"{c.headline.state_failed} failed end state")


def readme_figures() -> list[str]:
    """The sentence README quotes: the quickstart itself (airline, seed 0, 30 events, mock/demo)."""
    c = count("airline", 0, 30, "mock/demo")
    return [f"success is {100 * c.headline.passed / c.headline.rated:.0f} % ({c.headline.passed} of "
            f"{c.headline.rated} events) and the confirmed stop {100 * c.method.passed / c.method.rated:.0f} % "
            f"({c.method.passed} of {c.method.rated}); {c.method.violated} of its {c.method.passed} "
            f"passes have a policy the judge found violated"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()
    print(f"quickstart pipeline on mock/schema, seeds 0-{args.seeds - 1} x {args.events} events")
    for environment in ("airline", "retail"):
        total = RunCounts(environment, -1)
        for seed in range(args.seeds):
            c = count(environment, seed, args.events)
            print("  " + line(c))
            total.judged += c.judged
            for mine, theirs in ((total.method, c.method), (total.headline, c.headline)):
                mine.rated += theirs.rated
                mine.passed += theirs.passed
                mine.violated += theirs.violated
                mine.state_failed += theirs.state_failed
            for reason, n in c.failed_by.items():
                total.failed_by[reason] = total.failed_by.get(reason, 0) + n
        print(f"  {environment} total: judged {total.judged}; method's score {total.method.rate()}, "
              f"{total.method.wrong} of its passes with a violated policy or a failed end state; "
              f"headline {total.headline.rate()}, {total.headline.wrong} with either")
        if total.failed_by:
            print(f"  {environment} failing events by what failed: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(total.failed_by.items())))
    print("README's figures (the quickstart: airline, seed 0, 30 events):")
    for figure in readme_figures():
        print("  " + figure)


if __name__ == "__main__":
    main()
