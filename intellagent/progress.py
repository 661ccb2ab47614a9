"""What a person sees while a run goes on: per step, items done out of those known, how many
did not end ok, and the cost so far."""

from __future__ import annotations

import sys
import time
from typing import Any

from intellagent.llm import LLM


class Progress:
    """Per step: items done out of those known, how many did not pass (by the statuses each step
    declares as passed), cost so far. Redrawn in place on a terminal; one line per step at the
    end."""

    def __init__(self, llm: LLM, steps: dict[str, list[str]], stream: Any = None) -> None:
        self.llm = llm
        self.passed = steps  # step → the statuses it declares as passed
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.counts = {name: [0, 0, 0] for name in steps}  # done, not ok, expected
        self._last = 0.0

    def expect(self, step: str, n: int) -> None:
        self.counts[step][2] += n

    def tick(self, step: str, status: str) -> None:
        c = self.counts[step]
        c[0] += 1
        c[1] += status not in self.passed[step]
        if self.tty and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self.stream.write("\r" + " | ".join(f"{n} {d}/{t}" for n, (d, _, t) in self.counts.items()))
            self.stream.flush()

    def recount(self, steps: list[Any]) -> None:
        """The counts of the whole run (items other processes made too), from its summary."""
        for s in steps:
            if s.name in self.counts:
                done = s.items
                self.counts[s.name] = [done, done - sum(n for k, n in s.statuses.items()
                                                        if k in self.passed[s.name]), done]

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\r")
        width = max((len(n) for n in self.counts), default=4)
        for name, (done, other, expected) in self.counts.items():
            self.stream.write(f"{name:<{width}} {done:>6}/{expected:<6} not ok {other:<5} "
                              f"cost ${self.llm.spent_usd:.4f}\n")
        self.stream.flush()
