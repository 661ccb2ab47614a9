"""Metrics: plugins that reduce the scores items carry into tables, figures and charts.

A step attaches :class:`~intellagent.steps.Score`s to its items; a metric (registered with
``register_metrics``) reads them from the run's store and returns a :class:`MetricResult`, which
every reporter can render. The generic ones live here: a rate with its Wilson interval grouped by
any label, pass^k over trials of a group, micro-averaged precision and recall, a mean, and counts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, ClassVar, Iterable, Literal

from pydantic import BaseModel, Field, model_validator

from intellagent.bounds import MAX_ITEMS
from intellagent.model import StrictModel
from intellagent.steps import PASS_FAIL, UNFINISHED, NoOptions, Score


Z95 = 1.959964

#: The values of an ungrouped rate (``success.n``); a group's rate is its row's ``rate``.
RATE_VALUES = ("rate", "low", "high", "n", "passed")


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` / ``n`` (unrounded)."""
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def difference(a: tuple[int, int], b: tuple[int, int]) -> tuple[float, float, float] | None:
    """rate(b) − rate(a) with its 95 % interval (Newcombe's hybrid score method, from the two
    Wilson intervals), for (passed, n) pairs; None when either is empty."""
    if not a[1] or not b[1]:
        return None
    pa, pb = a[0] / a[1], b[0] / b[1]
    la, ua = wilson(*a)
    lb, ub = wilson(*b)
    d = pb - pa
    return d, d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)


class Rate(BaseModel):
    """A proportion with its 95 % Wilson score interval."""

    n: int
    passed: int
    rate: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, passed: int, n: int) -> "Rate":
        if n == 0:
            return cls(n=0, passed=0, rate=None, low=None, high=None)
        low, high = wilson(passed, n)
        return cls(n=n, passed=passed, rate=round(passed / n, 4), low=round(low, 4), high=round(high, 4))

    def text(self) -> str:
        if self.rate is None:
            return "– (nothing scored)"
        return f"{self.rate:.0%} ({self.low:.0%}–{self.high:.0%}, n={self.n})"


class Column(BaseModel):
    key: str
    label: str
    kind: Literal["text", "number", "rate", "percent"] = "text"
    group: bool = Field(default=False, description="The column names the row's group (a label "
                                                   "value): rows of two runs match on these.")
    better: Literal["higher", "lower"] = Field(default="higher", description="Which way is better "
                                               "(an error rate: lower): compare reads it.")
    items_by: str | None = Field(default=None, description="The score label this column's values "
                                 "are values of: the HTML report links each value to the items whose "
                                 "scores carry it (None: no link).")


class Chart(BaseModel):
    """A chart reporters draw from the rows: ``x`` a column, ``y`` a rate or number column."""

    kind: Literal["line", "bar"] = "line"
    x: str
    y: str
    title: str = ""


class MetricResult(BaseModel):
    name: str
    title: str
    description: str = ""
    headline: str | None = Field(default=None, description="One line for the terminal summary.")
    values: dict[str, int | float | None] = Field(default_factory=dict)
    columns: list[Column] = Field(default_factory=list)
    rows: list[dict[str, Any]] = Field(default_factory=list)
    charts: list[Chart] = Field(default_factory=list)


class GateValues(BaseModel):
    """The values a gate may name below a metric, known before the run (:meth:`Metric.values`):
    its own (``rate`` of ``success.rate``) and those of any row of its groups (``rate`` of
    ``by-category.billing.rate``; none when it has no groups). Either None: only the run tells."""

    own: list[str] | None = Field(default_factory=list)
    per_group: list[str] | None = Field(default_factory=list)


class Metric:
    """Base class of metric plugins. ``name`` is the metric's name in the pipeline."""

    name: ClassVar[str]
    Config: ClassVar[type[StrictModel]] = NoOptions

    def __init__(self, config: Any) -> None:
        self.config = config

    def check(self, plan: Any) -> str | None:
        """A problem with this metric in ``plan`` (e.g. it names a step that is not there)."""
        return None

    def reads(self) -> dict[str, list[str]]:
        """The scores it reads, each with the statuses it names itself: ``validate`` refuses a
        score or a status no step of the pipeline declares."""
        return {}

    def labels(self) -> dict[str, str]:
        """The score labels it reads, each with what becomes of it when no score it reads
        carries that label (``validate`` refuses it, where those scores declare their labels):
        by default those it groups ``by``."""
        by = getattr(self.config, "by", None)
        return {label: "every group would be empty" for label in by} if isinstance(by, list) else {}

    def compute(self, data: Any) -> MetricResult:
        raise NotImplementedError

    def bounds(self, path: list[str]) -> tuple[float, float] | None:
        """The range of the figure a gate names by ``path`` below this metric (its main figure
        when empty), when it has one (a rate: 0 to 1); None when unbounded or unknown."""
        return None

    def groups(self, plan: Any, env: Any) -> list[str] | None:
        """Every group a gate may name below this metric in a run of ``plan`` on ``env``, when
        they are known before the run (a gate naming another is refused then, costing nothing);
        None when only the run tells, or the metric has no groups (the default)."""
        return None

    def values(self, plan: Any, env: Any) -> GateValues | None:
        """The values a gate may name below this metric in a run of ``plan`` on ``env``: the
        figures of its result (a text column is none), its own and those of a group's row. A
        gate naming another is refused before the run, costing nothing; None when not declared
        (the default): only the run tells."""
        return None


def counted(data: Any, score: str, passed: list[str] | None, failed: list[str] | None) -> tuple[list[str], list[str]]:
    """The statuses that count as passed and as failed for ``score``: the metric's own when it
    names them, else the ones the steps declare (pass and fail when none does)."""
    plan = getattr(data, "plan", None)
    spec = plan.declared_scores().get(score) if plan is not None else None
    declared = spec.statuses if spec is not None and spec.statuses is not None else PASS_FAIL
    return (passed if passed is not None else declared.passed,
            failed if failed is not None else declared.failed)


def groups_of(score: Score, by: list[str]) -> list[tuple]:
    """The groups a score counts in: one per combination of its label values (a list label
    counts in each of its values); a score lacking a label counts nowhere."""
    combos: list[tuple] = [()]
    for label in by:
        if label not in score.labels:
            return []
        value = score.labels[label]
        values = value if isinstance(value, list) else [value]
        combos = [c + (v,) for c in combos for v in values]
    return combos


def label_groups(plan: Any, env: Any, scores: Iterable[str], by: list[str]) -> list[str] | None:
    """The groups of a metric grouped ``by`` labels of ``scores``, as a gate names them (a row
    by any of its label values): every value the plan fixes for each label; None when it has
    no groups, or one label's values are known only from the run."""
    if not by:
        return None
    out: list[str] = []
    for label in by:
        for score in scores:
            values = plan.label_values(score, label, env)
            if values is None:
                return None
            out += [str(v) for v in values if str(v) not in out]
    return out


class ByLabels:
    """A metric grouped ``by`` labels of the scores it reads: its groups are the values the plan
    fixes for those labels (see :func:`label_groups`), and its figures are its own without
    ``by``, each group's with it."""

    def groups(self, plan: Any, env: Any) -> list[str] | None:
        return label_groups(plan, env, list(self.reads()), self.config.by)  # type: ignore[attr-defined]

    def split_values(self, own: list[str] | None, per_group: list[str] | None) -> GateValues:
        """``own`` below the metric when it has no ``by``, else ``per_group`` below each group."""
        if self.config.by:  # type: ignore[attr-defined]
            return GateValues(own=[], per_group=per_group)
        return GateValues(own=own, per_group=[])


def _group_text(group: tuple) -> str:
    return "/".join(str(v) for v in group)


def _sort_key(group: tuple) -> tuple:
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in group)


class RateConfig(StrictModel):
    score: str = Field(description="The score name to count.")
    by: list[str] = Field(default_factory=list, description="Labels to group by.")
    passed: list[str] | None = Field(default=None, description="Statuses that count as success "
                                     "(default: those the score's steps declare as passed).")
    failed: list[str] | None = Field(default=None, description="Statuses that count as failure "
                                     "(default: those declared as failed); any other status is "
                                     "counted apart, never as a failure.")
    title: str | None = None
    description: str = ""
    chart: Literal["none", "line", "bar"] = "none"
    headline: str | None = Field(default=None, description="Label of the terminal summary line "
                                 "(with `by`, one line listing every group).")
    cumulative: bool = Field(default=False, description="Each row counts the items at or above "
                             "its value of the (single, numeric) `by` label.")

    @model_validator(mode="after")
    def _cumulative_needs_one_label(self) -> "RateConfig":
        if self.cumulative and len(self.by) != 1:
            raise ValueError("cumulative needs exactly one label in by")
        return self


class RateMetric(ByLabels, Metric):
    """Share of passes among scored items (pass + fail), with a 95 % Wilson interval, overall or
    grouped by labels; other statuses (infra errors, invalid items) are counted in their own
    column."""

    name = "rate"
    Config = RateConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.score: [*(self.config.passed or []), *(self.config.failed or [])]}

    def bounds(self, path: list[str]) -> tuple[float, float] | None:
        # the rate, its interval's ends, and a group's main figure (its rate); not n nor passed
        if not path or path[-1] in ("rate", "low", "high") or (len(path) == 1 and path[0] not in ("n", "passed")):
            return (0.0, 1.0)
        return None

    def values(self, plan: Any, env: Any) -> GateValues:
        return self.split_values(list(RATE_VALUES), ["rate"])

    def compute(self, data: Any) -> MetricResult:
        c: RateConfig = self.config
        passed, failed = counted(data, c.score, c.passed, c.failed)
        counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        others: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for _, score in data.scores(c.score):
            for group in groups_of(score, c.by):
                if score.status in passed or score.status in failed:
                    counts[group][0] += score.status in passed
                    counts[group][1] += 1
                else:
                    others[group][str(score.status)] += 1
        groups = sorted(set(counts) | set(others), key=_sort_key)
        if c.cumulative:  # each value: the items at or above it
            counts = {g: [sum(v[i] for h, v in counts.items() if _sort_key(h) >= _sort_key(g)) for i in (0, 1)]
                      for g in groups}
            others = {g: {k: sum(o.get(k, 0) for h, o in others.items() if _sort_key(h) >= _sort_key(g))
                          for k in {k for o in others.values() for k in o}} for g in groups}
        columns = [Column(key=label, label=(f"{label} ≥" if c.cumulative else label), group=True,
                          items_by=None if c.cumulative else label) for label in c.by]
        columns += [Column(key="rate", label="success", kind="rate"),
                    Column(key="other", label="not scored")]
        rows = []
        for group in groups:
            rate = Rate.of(*counts.get(group, [0, 0]))
            row = dict(zip(c.by, group))
            row["rate"] = rate.model_dump()
            row["other"] = ", ".join(f"{k} {v}" for k, v in sorted(others.get(group, {}).items()) if v)
            rows.append(row)
        values: dict[str, Any] = {}
        headline = None
        if not c.by:
            rate = Rate.of(*counts.get((), [0, 0]))
            values = {key: getattr(rate, key) for key in RATE_VALUES}
            headline = f"{c.headline or self.name} {rate.text()}"
        elif c.headline:  # one line for all groups
            headline = f"{c.headline}: " + ("; ".join(
                f"{_group_text(g)} {Rate.of(*counts.get(g, [0, 0])).text()}" for g in groups)
                or "– (nothing scored)")
        charts = [Chart(kind=c.chart, x=c.by[0], y="rate", title=c.title or "")] \
            if c.chart != "none" and c.by else []
        return MetricResult(name=self.name, title=c.title or self.name, description=c.description,
                            headline=headline, values=values, columns=columns, rows=rows,
                            charts=charts)


def pass_hat_k(trials: Iterable[list[bool]]) -> dict[int, float]:
    """The unbiased pass^k estimator: the mean over groups of C(c, k) / C(n, k) for c passes in
    n trials, for k = 1 .. the fewest trials of any group."""
    groups = [t for t in trials if t]
    if not groups:
        return {}
    top = min(len(t) for t in groups)
    return {k: round(sum(math.comb(sum(t), k) / math.comb(len(t), k) for t in groups) / len(groups), 4)
            for k in range(1, top + 1)}


class PassHatKConfig(StrictModel):
    score: str
    group: str = Field(description="The label naming the task each trial belongs to.")
    trial: str | None = Field(default=None, description="The label numbering a task's trials: "
                              "where a step fixes its values (its `trials`), a gate on a pass^k "
                              "it cannot give is refused before the run.")
    passed: list[str] | None = Field(default=None, description="Default: the declared passed statuses.")
    failed: list[str] | None = Field(default=None, description="Default: the declared failed statuses.")
    title: str | None = None
    description: str = ""


class PassHatKMetric(Metric):
    """pass^k over repeated trials of each group (τ-bench's reliability measure)."""

    name = "pass-hat-k"
    Config = PassHatKConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.score: [*(self.config.passed or []), *(self.config.failed or [])]}

    def labels(self) -> dict[str, str]:
        return {self.config.group: "no trial would count",
                **({self.config.trial: "its trials could not be counted before the run"} if self.config.trial else {})}

    def bounds(self, path: list[str]) -> tuple[float, float] | None:
        return (0.0, 1.0)  # every pass^k is a probability

    def values(self, plan: Any, env: Any) -> GateValues:
        """pass^1 up to the fewest scored trials of a group: at most as many as the trial label
        has values, where the plan fixes them (else only the run tells); no groups."""
        trials = plan.label_values(self.config.score, self.config.trial, env) if self.config.trial else None
        if not trials:
            return GateValues(own=None, per_group=[])
        return GateValues(own=[f"pass^{k}" for k in range(1, len(trials) + 1)], per_group=[])

    def compute(self, data: Any) -> MetricResult:
        c: PassHatKConfig = self.config
        passed, failed = counted(data, c.score, c.passed, c.failed)
        trials: dict[Any, list[bool]] = defaultdict(list)
        for _, score in data.scores(c.score):
            if c.group in score.labels and (score.status in passed or score.status in failed):
                trials[str(score.labels[c.group])].append(score.status in passed)
        result = pass_hat_k(trials.values())
        return MetricResult(
            name=self.name, title=c.title or "pass^k", description=c.description or
            "Mean over groups of C(c,k)/C(n,k), with c passes among n scored trials.",
            headline=(", ".join(f"pass^{k} {v:.3f}" for k, v in result.items()) or "pass^k –")
            + f" over {len(trials)} groups",
            values={f"pass^{k}": v for k, v in result.items()},
            columns=[Column(key="k", label="k", kind="number"),
                     Column(key="value", label="pass^k", kind="number")],
            rows=[{"k": k, "value": v} for k, v in result.items()])


class MicroPRConfig(StrictModel):
    matched: str = Field(description="Score whose value counts matched predictions.")
    predicted: str = Field(description="Score whose value counts predictions.")
    actual: str = Field(description="Score whose value counts ground-truth items.")
    by: list[str] = Field(default_factory=list)
    title: str | None = None
    description: str = ""


class MicroPRMetric(ByLabels, Metric):
    """Micro-averaged precision (Σ matched / Σ predicted) and recall (Σ matched / Σ actual):
    counts summed over items before dividing."""

    name = "micro-pr"
    Config = MicroPRConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.matched: [], self.config.predicted: [], self.config.actual: []}

    def values(self, plan: Any, env: Any) -> GateValues:
        return self.split_values(["precision", "recall"], ["precision", "recall", "matched", "predicted", "actual"])

    def compute(self, data: Any) -> MetricResult:
        c: MicroPRConfig = self.config
        sums: dict[tuple, dict[str, float]] = defaultdict(lambda: {"m": 0.0, "p": 0.0, "a": 0.0})
        names = {c.matched: "m", c.predicted: "p", c.actual: "a"}
        for _, score in data.scores():
            slot = names.get(score.name)
            if slot is None or score.value is None:
                continue
            for group in groups_of(score, c.by):
                sums[group][slot] += score.value
        rows = []
        for group in sorted(sums, key=_sort_key):
            s = sums[group]
            row = dict(zip(c.by, group))
            row |= {"precision": round(s["m"] / s["p"], 4) if s["p"] else None,
                    "recall": round(s["m"] / s["a"], 4) if s["a"] else None,
                    "matched": s["m"], "predicted": s["p"], "actual": s["a"]}
            rows.append(row)
        columns = [Column(key=label, label=label, group=True, items_by=label) for label in c.by] + [
            Column(key="precision", label="precision", kind="percent"),
            Column(key="recall", label="recall", kind="percent"),
            Column(key="matched", label="matched", kind="number"),
            Column(key="predicted", label="predicted", kind="number"),
            Column(key="actual", label="actual", kind="number")]
        values = {k: rows[0][k] for k in ("precision", "recall")} if rows and not c.by else {}
        headline = (f"{self.name} precision {values['precision']}, recall {values['recall']}"
                    if values else None)
        return MetricResult(name=self.name, title=c.title or self.name, description=c.description,
                            headline=headline, values=values, columns=columns, rows=rows)


class RatioConfig(StrictModel):
    numerator: str = Field(description="Score whose values are summed above the line.")
    denominator: str = Field(description="Score whose values are summed below the line.")
    by: list[str] = Field(default_factory=list)
    empty: float | None = Field(default=None, description="The value when the denominator sums "
                                "to 0 (a convention of the method, e.g. 1 for precision of no "
                                "actions).")
    title: str | None = None
    description: str = ""
    headline: str | None = Field(default=None, description="Label of the terminal summary line "
                                 "(with `by`, one line listing every group).")


class RatioMetric(ByLabels, Metric):
    """Σ numerator / Σ denominator over items (micro-averaged), overall or by labels."""

    name = "ratio"
    Config = RatioConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.numerator: [], self.config.denominator: []}

    def values(self, plan: Any, env: Any) -> GateValues:
        return self.split_values(["value"], ["value", self.config.numerator, self.config.denominator])

    def compute(self, data: Any) -> MetricResult:
        c: RatioConfig = self.config
        sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for _, score in data.scores():
            slot = 0 if score.name == c.numerator else 1 if score.name == c.denominator else None
            if slot is None or score.value is None:
                continue
            for group in groups_of(score, c.by):
                sums[group][slot] += score.value
        rows = [dict(zip(c.by, g)) | {"value": round(n / d, 4) if d else c.empty, c.numerator: n,
                                      c.denominator: d}
                for g, (n, d) in sorted(sums.items(), key=lambda kv: _sort_key(kv[0]))]
        columns = [Column(key=label, label=label, group=True, items_by=label) for label in c.by] + [
            Column(key="value", label=c.title or self.name, kind="percent"),
            Column(key=c.numerator, label=c.numerator, kind="number"),
            Column(key=c.denominator, label=c.denominator, kind="number")]
        values = {"value": rows[0]["value"] if rows else c.empty} if not c.by else {}
        headline = f"{c.headline or self.name} {values['value']}" if values and c.headline else None
        if c.by and c.headline and rows:  # one line for all groups
            headline = f"{c.headline}: " + "; ".join(
                f"{_group_text(tuple(r[label] for label in c.by))} {r['value']}" for r in rows)
        return MetricResult(name=self.name, title=c.title or self.name, description=c.description,
                            headline=headline, values=values, columns=columns, rows=rows)


class MeanConfig(StrictModel):
    score: str
    by: list[str] = Field(default_factory=list)
    title: str | None = None
    description: str = ""


class MeanMetric(ByLabels, Metric):
    """The mean of a score's values, overall or by labels."""

    name = "mean"
    Config = MeanConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.score: []}

    def values(self, plan: Any, env: Any) -> GateValues:
        return self.split_values(["mean", "n"], ["mean", "n"])

    def compute(self, data: Any) -> MetricResult:
        c: MeanConfig = self.config
        sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
        for _, score in data.scores(c.score):
            if score.value is None:
                continue
            for group in groups_of(score, c.by):
                sums[group][0] += score.value
                sums[group][1] += 1
        rows = [dict(zip(c.by, g)) | {"mean": round(s / n, 4) if n else None, "n": n}
                for g, (s, n) in sorted(sums.items(), key=lambda kv: _sort_key(kv[0]))]
        columns = [Column(key=label, label=label, group=True, items_by=label) for label in c.by] + [
            Column(key="mean", label="mean", kind="number"), Column(key="n", label="n", kind="number")]
        values = {"mean": rows[0]["mean"], "n": rows[0]["n"]} if rows and not c.by else {}
        return MetricResult(name=self.name, title=c.title or self.name, description=c.description,
                            values=values, columns=columns, rows=rows,
                            headline=f"{self.name} {values['mean']}" if values else None)


class CountsConfig(StrictModel):
    score: str
    by: list[str] = Field(default_factory=list)
    title: str | None = None
    description: str = ""


class CountsMetric(ByLabels, Metric):
    """How many scores of a name ended with each status, overall or by labels."""

    name = "counts"
    Config = CountsConfig

    def reads(self) -> dict[str, list[str]]:
        return {self.config.score: []}

    def values(self, plan: Any, env: Any) -> GateValues:
        # a count per status: those the score's steps declare, and the unfinished ones any may end with
        spec = plan.declared_scores().get(self.config.score)
        statuses = list(dict.fromkeys([*spec.statuses.all(), *UNFINISHED])) \
            if spec is not None and spec.statuses is not None else None
        return self.split_values(statuses, statuses)

    def compute(self, data: Any) -> MetricResult:
        c: CountsConfig = self.config
        counts: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        statuses: set[str] = set()
        for _, score in data.scores(c.score):
            for group in groups_of(score, c.by):
                counts[group][str(score.status)] += 1
                statuses.add(str(score.status))
        ordered = sorted(statuses)
        rows = [dict(zip(c.by, g)) | {s: counts[g].get(s, 0) for s in ordered}
                for g in sorted(counts, key=_sort_key)]
        columns = [Column(key=label, label=label, group=True, items_by=label) for label in c.by] + [
            Column(key=s, label=s, kind="number") for s in ordered]
        values = {s: rows[0][s] for s in ordered} if rows and not c.by else {}
        return MetricResult(name=self.name, title=c.title or self.name, description=c.description,
                            values=values, columns=columns, rows=rows)


class ListingConfig(StrictModel):
    step: str = Field(description="The step whose items to list.")
    statuses: list[str] = Field(min_length=1, description="List the items that ended with these "
                                "statuses.")
    title: str | None = None
    description: str = ""
    limit: int = Field(default=1000, ge=1, le=MAX_ITEMS)


class ListingMetric(Metric):
    """Every item of a step that ended with one of the given statuses, with why (an invalid
    event and the validators' complaints, an infra error and its cause)."""

    name = "listing"
    Config = ListingConfig

    def check(self, plan: Any) -> str | None:
        if self.config.step not in plan.steps:
            return f"no step named '{self.config.step}' (steps: {', '.join(plan.steps)})"
        return None

    def values(self, plan: Any, env: Any) -> GateValues:
        return GateValues(own=["items"], per_group=[])

    def compute(self, data: Any) -> MetricResult:
        c: ListingConfig = self.config
        rows, total = [], 0
        for item in data.items(c.step):
            if item.status in c.statuses:
                total += 1
                if len(rows) < c.limit:
                    rows.append({"item": item.item, "status": item.status, "why": item.note})
        return MetricResult(name=self.name, title=c.title or f"{c.step}: {', '.join(c.statuses)}",
                            description=c.description, values={"items": total},
                            columns=[Column(key="item", label="item"), Column(key="status", label="status"),
                                     Column(key="why", label="why")], rows=rows)


GENERIC_METRICS = (RateMetric, PassHatKMetric, MicroPRMetric, RatioMetric, MeanMetric, CountsMetric,
                   ListingMetric)
