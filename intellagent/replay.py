"""Replaying a run (``intellagent replay RUN``): its recorded outputs of the steps that talk to
the agent, handed to those steps again (``ctx.recorded``) while another agent answers.

A step that can replay (``replays = True``: the dialogue kit's simulated user) plays the recorded
side of its item again as long as the new agent answers as the recorded one did, and takes over
where it departs; it says how far it followed in a score named ``replay`` (status ``followed`` or
``departed``, value the agent's turn it departed at). A replayed item is keyed by the recording
too, so it is never a live item, nor the replay of another recording.

How an agent's reply text is compared with the recorded one is the run's ``text`` matcher:
``exact`` (after normalising: Unicode NFKC, case, runs of white space), ``fuzzy`` or ``fuzzy:N``
(rapidfuzz's token-sort ratio of the normalised texts at least N, 90 by default), ``any`` (text
not compared, only the tool calls), or ``module:function`` (``f(new, recorded) -> bool``).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from intellagent.errors import IntellagentError
from intellagent.results import adapter, annotation_of

REPLAY_SCORE = "replay"
FOLLOWED, DEPARTED = "followed", "departed"
TEXT_MATCHERS = "exact, fuzzy, fuzzy:N (0-100), any, or module:function"


def normalised(text: str) -> str:
    """``text`` with Unicode compatibility forms, case and runs of white space evened out."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text or "")).strip().casefold()


def text_matcher(spec: str) -> Callable[[str, str], bool]:
    """The comparator named ``spec`` (see the module's docstring)."""
    if spec == "exact":
        return lambda new, recorded: normalised(new) == normalised(recorded)
    if spec == "any":
        return lambda new, recorded: True
    if spec == "fuzzy" or spec.startswith("fuzzy:"):
        try:
            threshold = float(spec.partition(":")[2] or 90)
        except ValueError:
            threshold = -1
        if not 0 <= threshold <= 100:
            raise IntellagentError(f"'{spec}': fuzzy:N takes N from 0 to 100", item="--text")
        from rapidfuzz import fuzz

        return lambda new, recorded: fuzz.token_sort_ratio(normalised(new), normalised(recorded)) >= threshold
    if ":" in spec:
        from intellagent.environment.refs import ReferenceError_, resolve

        try:
            fn = resolve(spec, Path.cwd())
        except ReferenceError_ as exc:
            raise IntellagentError(f"'{spec}': {exc}", item="--text") from None
        if not callable(fn):
            raise IntellagentError(f"'{spec}' is not a function", item="--text")
        try:
            inspect.signature(fn).bind("", "")
        except (TypeError, ValueError):
            raise IntellagentError(f"'{spec}' is not a function f(new, recorded) -> bool (its "
                                   "parameters take no two texts)", item="--text") from None
        return _guarded(spec, fn)
    raise IntellagentError(f"unknown text matcher '{spec}' ({TEXT_MATCHERS})", item="--text")


def _guarded(spec: str, fn: Callable[[str, str], Any]) -> Callable[[str, str], bool]:
    """``fn`` as a matcher: an exception it raises is bad input (--text, exit 2), never a
    departure nor an item's error: a broken comparator would decide every dialog."""
    def same(new: str, recorded: str) -> bool:
        try:
            return bool(fn(new, recorded))
        except Exception as exc:
            raise IntellagentError(f"'{spec}' raised {type(exc).__name__}: {str(exc)[:200]}",
                                   item="--text") from None
    return same


def matcher_fingerprint(spec: str) -> str:
    """What the matcher's results depend on: its name, and a function's source."""
    if ":" in spec and not spec.startswith("fuzzy"):
        from intellagent.environment.refs import resolve

        try:
            source = inspect.getsource(resolve(spec, Path.cwd()))
        except (OSError, TypeError):
            source = ""
        return f"{spec}:{hashlib.sha256(source.encode()).hexdigest()}"
    return spec


@dataclass
class Recorded:
    """What a step sees of its item's recording (``ctx.recorded``)."""

    value: Any  #: the output the step gave for this item in the recorded run
    run_id: str  #: the recorded run
    same_text: Callable[[str, str], bool]  #: the run's text matcher


class Recording:
    """The outputs a finished run recorded for the steps that talk to the agent, by step and item."""

    def __init__(self, store: Any, run_id: str, plan: Any, text: str = "exact") -> None:
        self.store = store
        self.run_id = run_id
        self.text = text
        self.same_text = text_matcher(text)
        self.fingerprint = ["replay", run_id, matcher_fingerprint(text)]
        self.keys = {(row["step"], row["item"]): row["key"]
                     for step in plan.steps.values() if step.uses_agent
                     for row in store.run_items(run_id, step.name)}

    def find(self, step: str, item: str) -> Any:
        """The stored item ``step`` recorded for ``item`` (with its payload), or None."""
        key = self.keys.get((step, item))
        return self.store.item(key) if key is not None else None

    def recorded(self, step: Any, row: Any) -> Recorded:
        value = adapter(annotation_of(step.output)).validate_json(row.payload) if row.payload else None
        return Recorded(value=value, run_id=self.run_id, same_text=self.same_text)
