"""A run's results as metrics and reporters read them: streamed from the store, never all held
in memory, decoded with the types the steps declared."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Iterator

from pydantic import BaseModel, Field, TypeAdapter

from intellagent.llm.errors import over_context
from intellagent.plan import Plan, TypeRef
from intellagent.steps import DEGRADED, REMADE, Score
from intellagent.store import Store


@dataclass
class RunItem:
    """One item of a run at one step."""

    step: str
    item: str  # "" for a once-step; "E0004", "E0004/2" for fan-out items
    status: str
    note: str
    key: str
    payload: str | None = None
    warnings: list[str] = field(default_factory=list)
    value_hash: str = ""  # the item's value's identity (the same value, the same hash)
    scores_json: str = "[]"  # as stored; read into ``scores`` when first asked for

    @cached_property
    def scores(self) -> list[Score]:
        """The item's scores (read on first use: a report walks every item for its outcome
        several times, and most walks never look at the scores)."""
        return _SCORES.validate_json(self.scores_json) if self.scores_json else []


_SCORES = TypeAdapter(list[Score])  # an item's scores are read in one call, not score by score


@lru_cache(maxsize=256)
def adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def _warnings(text: str | None) -> list[str]:
    return json.loads(text) if text and text != "[]" else []  # (most items have none)


def annotation_of(ref: TypeRef) -> Any:
    return list[ref.base] if ref.many else ref.base  # type: ignore[name-defined]


class RunData:
    """The items of one run of a plan."""

    def __init__(self, store: Store, run_id: str, plan: Plan) -> None:
        self.store = store
        self.run_id = run_id
        self.plan = plan

    def items(self, step: str | None = None, *, prefix: str | None = None,
              payload: bool = False, scored: bool = False) -> Iterator[RunItem]:
        """The run's items in position order (``scored``: only those with scores)."""
        for row in self.store.run_items(self.run_id, step, prefix=prefix, payload=payload, scored=scored):
            yield RunItem(step=row["step"], item=row["item"], status=row["status"],
                          note=row["note"] or "", scores_json=row["scores"] or "", key=row["key"],
                          payload=row.get("payload"), warnings=_warnings(row.get("warnings")),
                          value_hash=row.get("value_hash") or "")

    def scores(self, name: str | None = None, step: str | None = None) -> Iterator[tuple[RunItem, Score]]:
        for item in self.items(step, scored=True):
            for score in item.scores:
                if name is None or score.name == name:
                    yield item, score

    def decode(self, step: str, payload: str | None, as_type: Any = None) -> Any:
        """The item's value (read as ``as_type``, a model of the few fields a reader needs, when
        given: the rest of the payload is skipped); None for an item that has none (it could
        not finish)."""
        if payload in (None, "null"):
            return None
        return adapter(as_type or annotation_of(self.plan.steps[step].output)).validate_json(payload)

    def value(self, step: str, item: str = "") -> Any:
        """The output of ``step`` for ``item`` (None when the run has none)."""
        for found in self.store.run_items(self.run_id, step, payload=True):
            if found["item"] == item:
                return self.decode(step, found["payload"])
        return None

    def values(self, step: str, as_type: Any = None) -> Iterator[tuple[str, Any]]:
        for found in self.items(step, payload=True):
            value = self.decode(step, found.payload, as_type)
            if value is not None:
                yield found.item, value


class StepSummary(BaseModel):
    """How many items a step had and how they ended: the run's funnel."""

    name: str
    use: str
    kind: str
    each: str | None = None
    items: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    notes: dict[str, int] = Field(default_factory=dict, description="Why items ended with another "
                                  "status than ok, pass or fail: note → count (most common).")
    warnings: dict[str, int] = Field(default_factory=dict, description="Warnings on the items: "
                                     "warning → how many items carry it.")
    over_context: dict[str, int] = Field(default_factory=dict, description="Items that could not "
                                         "finish, or were made degraded, because a prompt was longer "
                                         "than its model's context: status → count. Running again "
                                         "cannot fix them.")


def summarize(data: RunData) -> list[StepSummary]:
    out = []
    for s in data.plan.steps.values():
        summary = StepSummary(name=s.name, use=s.use, kind=s.kind, each=s.each)
        notes: dict[str, int] = {}
        for item in data.items(s.name):
            summary.items += 1
            for warning in item.warnings:
                summary.warnings[warning] = summary.warnings.get(warning, 0) + 1
            summary.statuses[item.status] = summary.statuses.get(item.status, 0) + 1
            if item.status in REMADE and over_context(item.note or ""):
                summary.over_context[item.status] = summary.over_context.get(item.status, 0) + 1
            if item.status not in ("ok", "pass", "fail") and item.note:
                reason = item.note.split(":")[0][:120]
                notes[reason] = notes.get(reason, 0) + 1
        summary.notes = dict(sorted(notes.items(), key=lambda kv: -kv[1])[:10])
        out.append(summary)
    return out


#: Kinds whose failed items are output all the same (a verdict that fails, a dialog in which the
#: agent crashed); a failed item of another kind is a rejected one (a blueprint that failed review).
FAILED_IS_OUTPUT = ("critic", "simulator")


def usable(plan: Plan, step: StepSummary) -> int:
    """The step's items that carry an output a later step or a reader can use: the statuses it
    declares as passed (and failed, for a judge or a dialog), and degraded ones."""
    planned = plan.steps.get(step.name)
    statuses = getattr(planned.plugin, "statuses", None) if planned is not None else None
    if statuses is None:
        return sum(n for k, n in step.statuses.items() if k in ("ok", "pass", "fail", DEGRADED))
    counted = set(statuses.passed) | {DEGRADED}
    if step.kind in FAILED_IS_OUTPUT:
        counted |= set(statuses.failed)
    return sum(n for k, n in step.statuses.items() if k in counted)


def shortfalls(plan: Plan, steps: list[StepSummary]) -> list[str]:
    """What a finished run did not make, in plain lines: each step whose items are none or fewer
    than half usable (with the step's own hint on how to get a useful run), then the steps left
    with nothing to work on."""
    lines: list[str] = []
    starved: list[str] = []
    short: set[str] = set()  # steps that made nothing or too little
    for step in steps:
        if step.items == 0:
            before = set(plan.upstream(step.name)) - {step.name} if step.name in plan.steps else set()
            if before & short or (step is steps[-1] and any(s.items for s in steps)):
                starved.append(step.name)  # starved by a step before it, or the run's output is none
                short.add(step.name)
            continue
        made = usable(plan, step)
        if made * 2 >= step.items:
            continue
        ended = ", ".join(f"{n} {k}" for k, n in sorted(step.statuses.items(), key=lambda kv: -kv[1]))
        short.add(step.name)
        line = (f"nothing came out of step {step.name}: {step.items} item(s), none usable ({ended})" if made == 0
                else f"step {step.name} made only {made} usable item(s) of {step.items} ({ended})")
        planned = plan.steps.get(step.name)
        # the step's hint (how to get a useful run: a real model) where it made nothing, or its
        # models are mock ones (a real model falling short is told the figures, not "use one")
        mock = planned is not None and any(plan.spec.llm.for_role(r).model.startswith("mock/")
                                           for r in planned.roles)
        hint = getattr(planned.plugin, "empty_hint", "") if planned is not None and (made == 0 or mock) else ""
        lines.append(line + (f"; {hint}" if hint else ""))
    if starved:
        lines.append(f"step{'s' if len(starved) > 1 else ''} {', '.join(starved)} had nothing to work on")
    return lines


def finals(data: RunData) -> dict[str, RunItem]:
    """Each item of the first fan-out at the last step it reached (its outcome)."""
    domains = data.plan.domains()
    if not domains:
        return {}
    last: dict[str, RunItem] = {}
    for name in (s.name for s in data.plan.steps.values() if s.domain == domains[0]):
        for item in data.items(name):  # execution order: a later step's item overrides
            last[item.item] = item
    return last


def judged(plan: Plan, item: RunItem) -> str:
    """How an item's status counts, as its step declares it: ``passed``, ``failed``, ``other``,
    or ``unfinished`` (it could not finish, or a status the step does not declare)."""
    statuses = plan.steps[item.step].statuses
    for kind in ("passed", "failed", "other"):
        if item.status in getattr(statuses, kind):
            return kind
    return "unfinished"


def outcomes(data: RunData) -> dict[str, int]:
    """Each item of the first fan-out with the status of the last step it reached."""
    counts: dict[str, int] = {}
    for item in finals(data).values():
        counts[item.status] = counts.get(item.status, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
