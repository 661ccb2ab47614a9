"""What a person sees while a run goes on, per step: items done out of those known, elapsed time,
an estimate of the time left, the step's own cost so far, retries and infra errors so far.

On a terminal it is a ``rich`` display redrawn in place and erased when the run ends; without one
(a CI log, ``nohup``) one plain line every ``every`` seconds, each naming the time elapsed. Then a
table of the steps. Fed by what the runner is told (items known, started, finished; every model
call as it ends), never by reading the store while the run goes on.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from intellagent.events import ModelCall

DEFAULT_EVERY = 30.0  # seconds between two plain lines
REFRESHES_PER_SECOND = 4  # of the terminal display
INFRA_ERROR = "infra-error"


def clock(seconds: float) -> str:
    """``H:MM:SS``."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass
class StepFigures:
    """One step's figures so far (as this process has seen them)."""

    name: str
    passed: frozenset[str]
    expected: int = 0
    done: int = 0
    not_ok: int = 0
    cost: float = 0.0
    retries: int = 0
    errors: int = 0
    started: float | None = None  # time.monotonic()
    ended: float | None = None
    failed_items: set[str] = field(default_factory=set)  # items whose calls ended infra-error

    def elapsed(self, now: float) -> float:
        if self.started is None:
            return 0.0
        return (self.ended if self.ended is not None else now) - self.started

    def eta(self, now: float) -> float | None:
        """Seconds left at the pace so far; None before the first item or once done."""
        if self.started is None or self.ended is not None or not self.done or self.done >= self.expected:
            return None
        return self.elapsed(now) / self.done * (self.expected - self.done)

    def text(self, now: float) -> str:
        """``12/50 0:01:10 eta 0:03:10 $0.0123 retries 2 infra errors 0``."""
        if self.ended is not None:
            timing = f"done in {clock(self.elapsed(now))}"
        else:
            eta = self.eta(now)
            timing = f"{clock(self.elapsed(now))} eta {clock(eta) if eta is not None else '-:--:--'}"
        return (f"{self.done}/{self.expected} {timing} ${self.cost:.4f} retries {self.retries} "
                f"infra errors {self.errors}")


class Progress:
    """The figures of ``steps`` (each step's name → the statuses it declares as passed) and how
    they are shown on ``stream`` (stderr by default): ``quiet`` shows nothing, not even the
    final table."""

    def __init__(self, steps: dict[str, Iterable[str]], stream: Any = None, *,
                 every: float = DEFAULT_EVERY, quiet: bool = False, console: Any = None) -> None:
        self.steps = {name: StepFigures(name, frozenset(passed)) for name, passed in steps.items()}
        self.stream = stream or (console.file if console is not None else sys.stderr)
        self.every = every
        self.quiet = quiet
        self.console = console  # a rich Console to draw on (else one on ``stream`` if a terminal)
        self.began = time.monotonic()
        self._live: Any = None  # the rich display, on a terminal
        self._tasks: dict[str, Any] = {}  # step → its rich task
        self._ticker: threading.Thread | None = None  # the plain lines, elsewhere
        self._stop = threading.Event()

    # -- what the runner tells ---------------------------------------------------------------

    def start(self) -> None:
        """Start showing: a display redrawn in place on a terminal, else a line every ``every``
        seconds."""
        self.began = time.monotonic()
        if self.quiet or self._live is not None or self._ticker is not None:
            return
        if self.console is not None or _is_terminal(self.stream):
            self._live = _display(self.stream, self.console)
            self._live.start()
        else:
            self._ticker = threading.Thread(target=self._lines, name="intellagent-progress", daemon=True)
            self._ticker.start()

    def expect(self, step: str, n: int) -> None:
        """``n`` more items of ``step`` are known."""
        figures = self.steps[step]
        figures.expected += n
        if n:
            figures.ended = None  # more to do
        self._show(figures)

    def step_started(self, step: str) -> None:
        figures = self.steps[step]
        figures.started = time.monotonic()
        if self._live is not None:
            self._tasks[step] = self._live.add_task(step, total=figures.expected, figures=figures)

    def tick(self, step: str, status: str, item: str | None = None) -> None:
        """An item of ``step`` is finished with ``status``."""
        figures = self.steps[step]
        figures.done += 1
        figures.not_ok += status not in figures.passed
        if status == INFRA_ERROR and item not in figures.failed_items:  # counted once per item
            figures.errors += 1
        if figures.done >= figures.expected:  # all known items are done (more may come)
            figures.ended = time.monotonic()
        self._show(figures)

    def call(self, call: ModelCall, item: str | None = None) -> None:
        """A model call of the item ``item`` ended: its cost, retries and failure."""
        figures = self.steps.get(call.stage or "")
        if figures is None:
            return
        figures.cost += call.cost_usd
        figures.retries += max(0, call.attempts - 1)
        if call.outcome == INFRA_ERROR:
            figures.errors += 1
            if item is not None:
                figures.failed_items.add(item)

    def step_done(self, step: str) -> None:
        figures = self.steps[step]
        if figures.ended is None:  # (its last item may have ended well before its fan-out did)
            figures.ended = time.monotonic()
        figures.failed_items = set()
        self._show(figures)

    def recount(self, steps: list[Any], costs: dict[str, float] | None = None) -> None:
        """The items (and the cost by step) of the whole run, from its summary: items other
        processes made too."""
        for s in steps:
            figures = self.steps.get(s.name)
            if figures is not None:
                figures.done = figures.expected = s.items
                figures.not_ok = s.items - sum(n for k, n in s.statuses.items() if k in figures.passed)
        for name, cost in (costs or {}).items():
            if name in self.steps:
                self.steps[name].cost = cost

    def finish(self) -> None:
        """Stop showing progress (nothing of it is left on the screen) and write the table of
        the steps."""
        self.close()
        if self.quiet:
            return
        now = time.monotonic()
        rows = [("step", "items", "not ok", "elapsed", "cost", "retries", "infra errors")]
        for f in self.steps.values():
            rows.append((f.name, f"{f.done}/{f.expected}", str(f.not_ok), clock(f.elapsed(now)),
                         f"${f.cost:.4f}", str(f.retries), str(f.errors)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stream.write("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                        for i, (cell, w) in enumerate(zip(row, widths))).rstrip() + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Stop showing progress (also when the run stops on an error)."""
        self._stop.set()
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()
        if self._ticker is not None:
            ticker, self._ticker = self._ticker, None
            ticker.join(timeout=5)

    # -- showing -------------------------------------------------------------------------------

    def line(self) -> str:
        """One plain line of every step started so far."""
        now = time.monotonic()
        parts = [f"{f.name} {f.text(now)}" for f in self.steps.values() if f.started is not None]
        return f"{clock(now - self.began)} elapsed | " + (" | ".join(parts) or "starting")

    def _lines(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.stream.write(self.line() + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # the stream was closed: nobody is reading
                return

    def _show(self, figures: StepFigures) -> None:
        task = self._tasks.get(figures.name)
        if task is not None and self._live is not None:
            self._live.update(task, total=figures.expected, completed=figures.done)


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal a display can be redrawn on (rich's judgement, which
    honours ``TTY_COMPATIBLE``, ``TTY_INTERACTIVE`` and ``TERM=dumb``)."""
    if not (hasattr(stream, "isatty") and stream.isatty()):
        return False
    from rich.console import Console

    console = Console(file=stream)
    return console.is_terminal and console.is_interactive


def _display(stream: Any, console: Any = None) -> Any:
    """A rich progress display of the steps on ``stream``, erased when stopped."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress as Rich, ProgressColumn, SpinnerColumn, TextColumn
    from rich.text import Text

    class Figures(ProgressColumn):
        """A step's figures, as the plain lines give them."""

        def render(self, task: Any) -> Text:
            figures = task.fields.get("figures")
            return Text(figures.text(time.monotonic()) if figures is not None else "")

    return Rich(SpinnerColumn(finished_text="✓"), TextColumn("{task.description}"),
                BarColumn(bar_width=24), Figures(), console=console or Console(file=stream),
                transient=True, refresh_per_second=REFRESHES_PER_SECOND)
