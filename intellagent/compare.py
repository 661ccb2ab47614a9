"""Two runs side by side: which items were shared (the same events reused), how each item's
outcome changed, and how every rate moved, with a 95 % interval for the difference."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from intellagent.errors import IntellagentError
from intellagent.metrics import difference
from intellagent.report import RunInfo, RunReport
from intellagent.replay import REPLAY_SCORE
from intellagent.results import finals


class ItemChange(BaseModel):
    item: str
    a: str
    b: str


class RateDelta(BaseModel):
    metric: str
    title: str
    column: str = "rate"
    better: str = Field(default="higher", description="Which way is better for this rate.")
    group: dict[str, Any] = Field(default_factory=dict)
    a: dict[str, Any]
    b: dict[str, Any]
    delta: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = Field(default=None, description="Two-sided p-value of no change "
                                  "(two-proportion z-test, pooled).")
    holm: float | None = Field(default=None, description="The p-value adjusted by Holm's method "
                               "over all the comparison's rates: below 0.05, the change stands "
                               "however many rates were compared.")

    @property
    def direction(self) -> str:
        """``better``, ``worse`` or ``same`` (under half a point), read in the rate's own direction."""
        if self.delta is None or abs(self.delta) < 0.005:
            return "same"
        return "better" if (self.delta > 0) == (self.better == "higher") else "worse"

    @property
    def regressed(self) -> bool:
        """B is worse than A and the 95 % interval of the difference excludes 0."""
        if self.delta is None:
            return False
        return self.high < 0 if self.better == "higher" else self.low > 0

    def text(self) -> str:
        def rate(r: dict) -> str:
            return "–" if r.get("rate") is None else f"{r['rate']:.0%} (n={r['n']})"
        if self.delta is None:
            return f"{rate(self.a)} → {rate(self.b)}"
        return (f"{rate(self.a)} → {rate(self.b)}, Δ {self.delta * 100:+.0f} pp "
                f"[{self.low * 100:+.0f}, {self.high * 100:+.0f}]")


class ReplayedItem(BaseModel):
    """An item of a replay (B) of run A: where its agent departed from A's recording, and how
    the item ended in each run."""

    item: str
    departed: int | None = Field(default=None, description="The agent's turn it departed at; None: "
                                 "it followed the recording to the end.")
    why: str = ""
    a: str = ""
    b: str = ""

    def line(self) -> str:
        where = "followed the recording to the end" if self.departed is None else \
            f"departed at agent turn {self.departed} ({self.why})"
        return f"{self.item}: {where}; {self.a or '–'} → {self.b or '–'}"


class Comparison(BaseModel):
    a: RunInfo
    b: RunInfo
    differences: list[str] = Field(default_factory=list, description="What differs in what the "
                                   "two runs tested (their provenance), one line each.")
    unknown: list[str] = Field(default_factory=list, description="What the runs' provenance "
                               "cannot tell apart (a black-box agent), one line each.")
    shared: dict[str, tuple[int, int]] = Field(default_factory=dict, description="Per step: items "
                                               "identical in both runs (reused), items in both.")
    changes: list[ItemChange] = Field(default_factory=list)
    transitions: dict[str, int] = Field(default_factory=dict)
    deltas: list[RateDelta] = Field(default_factory=list)
    replayed: list[ReplayedItem] = Field(default_factory=list, description="When B replayed A's "
                                         "dialogs (intellagent replay): each item's departure and "
                                         "outcomes.")


def z_test(a: tuple[int, int], b: tuple[int, int]) -> float | None:
    """Two-sided p-value that two proportions (passed, n) are equal (pooled z-test)."""
    if not a[1] or not b[1]:
        return None
    pooled = (a[0] + b[0]) / (a[1] + b[1])
    spread = math.sqrt(pooled * (1 - pooled) * (1 / a[1] + 1 / b[1]))
    if spread == 0:
        return 1.0
    return math.erfc(abs(b[0] / b[1] - a[0] / a[1]) / spread / math.sqrt(2))


def holm_adjust(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: the k-th smallest of m p-values times m − k + 1, kept
    monotone, at most 1; in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - k) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm(deltas: list[RateDelta]) -> None:
    """Set each delta's p-value and its Holm adjustment over all the deltas that have one."""
    for d in deltas:
        d.p_value = z_test((d.a["passed"], d.a["n"]), (d.b["passed"], d.b["n"]))
    tested = [d for d in deltas if d.p_value is not None]
    for d, adjusted in zip(tested, holm_adjust([d.p_value for d in tested])):
        d.p_value, d.holm = round(d.p_value, 6), round(adjusted, 6)


def _final(data: Any) -> dict[str, str]:
    return {key: item.status for key, item in finals(data).items()}


def compare(a: tuple[RunReport, Any], b: tuple[RunReport, Any]) -> Comparison:
    """Run B against run A. Two runs of different pipelines or environments are not comparable
    (an error naming both)."""
    (report_a, data_a), (report_b, data_b) = a, b
    for what in ("pipeline", "environment"):
        left, right = getattr(report_a.info, what), getattr(report_b.info, what)
        if left != right:
            raise IntellagentError(f"the runs tested different {what}s ({left} in "
                                   f"{report_a.info.run_id}, {right} in {report_b.info.run_id}): "
                                   "nothing to compare", item="compare")
    pa, pb = report_a.info.provenance, report_b.info.provenance
    differences = pa.differences(pb) if pa is not None and pb is not None else \
        ["what was tested is not recorded for the older of the two runs"] if pa is not pb else []
    unknown = pa.unknown(pb) if pa is not None and pb is not None else []
    shared: dict[str, tuple[int, int]] = {}
    for step in data_b.plan.steps:
        if step not in data_a.plan.steps:
            continue
        keys_a = {i.item: i.key for i in data_a.items(step)}
        keys_b = {i.item: i.key for i in data_b.items(step)}
        both = set(keys_a) & set(keys_b)
        shared[step] = (sum(keys_a[k] == keys_b[k] for k in both), len(both))
    final_a, final_b = _final(data_a), _final(data_b)
    changes = [ItemChange(item=k, a=final_a[k], b=final_b[k]) for k in sorted(set(final_a) & set(final_b))
               if final_a[k] != final_b[k]]
    transitions = Counter(f"{c.a} → {c.b}" for c in changes)
    deltas = []
    for name, mb in report_b.metrics.items():
        ma = report_a.metrics.get(name)
        rate_columns = [c for c in mb.columns if c.kind == "rate"]
        if ma is None or not rate_columns:
            continue
        labels = [c.key for c in mb.columns if c.group]
        index_a = {tuple(r.get(k) for k in labels): r for r in ma.rows}
        for row in mb.rows:
            group = tuple(row.get(k) for k in labels)
            row_a = index_a.get(group)
            if row_a is None:
                continue
            for column in rate_columns:
                ra, rb = row_a[column.key], row[column.key]
                diff = difference((ra["passed"], ra["n"]), (rb["passed"], rb["n"]))
                deltas.append(RateDelta(metric=name, title=mb.title, column=column.key, better=column.better,
                                        group=dict(zip(labels, group)), a=ra, b=rb,
                                        **(dict(zip(("delta", "low", "high"), diff)) if diff else {})))
    holm(deltas)
    replayed = []
    if pb is not None and pb.replays == report_a.info.run_id:
        for item, score in data_b.scores(REPLAY_SCORE):
            replayed.append(ReplayedItem(item=item.item, departed=None if score.value is None else int(score.value),
                                         why=score.note, a=final_a.get(item.item, ""),
                                         b=final_b.get(item.item, "")))
    return Comparison(a=report_a.info, b=report_b.info, differences=differences, unknown=unknown,
                      shared=shared, changes=changes, transitions=dict(transitions.most_common()),
                      deltas=deltas, replayed=replayed)
