"""When a predicted call counts as a ground-truth call: the rules each tool declares under
``meta.equivalence`` in ``tools.yaml``, and the check that applies them.

A call always needs the ground truth's exception (both none, or the same text). Then the
response (equal, ignored, or the ground truth's ids among the prediction's) and the parameters
(every ground-truth parameter, only some, or the whole request), each parameter by its rule:
exact, as a set, by date, case-folded, ignored, or free text scored by a comparator against a
threshold.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Literal

from pydantic import Field, field_validator

from intellagent.model import StrictModel
from intellagent_plugins.tooltalk.artefacts import ApiCall
from intellagent_plugins.tooltalk.environment.tools import STAMP

Comparator = Callable[[str, str], float]


class TextRule(StrictModel):
    text: float = Field(ge=0, le=1, description="The least similarity that still matches.")


FieldRule = Literal["exact", "set", "date", "casefold", "ignore"] | TextRule


class IdsRule(StrictModel):
    ids: str = Field(description="LIST.FIELD: the ground truth's ids must all be among the "
                                 "prediction's (e.g. alarms.alarm_id).")

    @field_validator("ids")
    @classmethod
    def _path(cls, value: str) -> str:
        if value.count(".") != 1:
            raise ValueError("write LIST.FIELD, e.g. alarms.alarm_id")
        return value


class Equivalence(StrictModel):
    response: Literal["equal", "ignore"] | IdsRule = "equal"
    parameters: Literal["ground-truth", "listed", "request"] = "ground-truth"
    not_null: bool = Field(default=False, description="A ground-truth parameter predicted as "
                                                      "null never matches.")
    fields: dict[str, FieldRule] = Field(default_factory=dict)
    corrections: dict[str, FieldRule] = Field(default_factory=dict, description="Rules used "
                                              "instead when the reference's slips are corrected.")

    def rules(self, corrected: bool) -> dict[str, FieldRule]:
        return {**self.fields, **self.corrections} if corrected else dict(self.fields)


class ToolMeta(StrictModel):
    """What a ToolTalk tool declares under ``meta`` in ``tools.yaml``."""

    plugin: str
    auth: bool = False
    equivalence: Equivalence = Field(default_factory=Equivalence)


def _date(value: Any) -> Any:
    return datetime.strptime(value, STAMP).date()


def _field(name: str, rule: FieldRule, predicted: Any, truth: Any, compare: Comparator,
           threshold: Callable[[str, float], float]) -> str | None:
    """Why ``predicted`` is not equivalent to ``truth`` under ``rule``, or None."""
    if isinstance(rule, TextRule):
        least = threshold(name, rule.text)
        score = 0.0 if predicted is None or truth is None else compare(str(predicted), str(truth))
        return None if score >= least else f"{name}: similarity {score:.2f} < {least:g}"
    if rule == "ignore":
        return None
    if rule == "set":
        try:
            same = set(predicted) == set(truth)
        except TypeError:
            same = False
        return None if same else f"{name}: {predicted!r} is not the set {truth!r}"
    if rule == "date":
        try:
            same = _date(predicted) == _date(truth)
        except (TypeError, ValueError):
            same = False
        return None if same else f"{name}: {predicted!r} is not on the day of {truth!r}"
    if rule == "casefold":
        if isinstance(predicted, str) and isinstance(truth, str):
            same = predicted.lower().strip() == truth.lower().strip()
        else:
            same = predicted == truth
        return None if same else f"{name}: {predicted!r} ≠ {truth!r} (ignoring case)"
    return None if predicted == truth else f"{name}: {predicted!r} ≠ {truth!r}"


def mismatch(prediction: ApiCall, truth: ApiCall, rule: Equivalence, compare: Comparator, *,
             corrected: bool = False, threshold: Callable[[str, float], float] | None = None) -> str | None:
    """Why ``prediction`` does not count as ``truth`` (same tool assumed), or None if it does.
    ``threshold(field, declared)`` may replace a text field's declared threshold."""
    threshold = threshold or (lambda name, declared: declared)
    if prediction.exception != truth.exception:
        return f"exception {prediction.exception!r}, expected {truth.exception!r}"
    if rule.response == "equal":
        if prediction.response != truth.response:
            return "a different response"
    elif isinstance(rule.response, IdsRule):
        listing, key = rule.response.ids.split(".")
        try:
            found = {r[key] for r in prediction.response[listing]}
            wanted = [r[key] for r in truth.response[listing]]
        except (KeyError, TypeError):
            return f"no {listing} to compare"
        missing = [i for i in wanted if i not in found]
        if missing:
            return f"{listing} lack {', '.join(map(str, missing))}"
    predicted = prediction.request.parameters or {}
    expected = truth.request.parameters or {}
    if rule.parameters == "request":
        return None if prediction.request == truth.request else "a different request"
    rules = rule.rules(corrected)
    names = list(expected) if rule.parameters == "ground-truth" else list(rules)
    for name in names:
        if name not in predicted:
            return f"{name}: missing"
        if name not in expected:
            return f"{name}: not in the ground truth"
        if rule.not_null and predicted[name] is None:
            return f"{name}: null"
        why = _field(name, rules.get(name, "exact"), predicted[name], expected[name], compare, threshold)
        if why:
            return why
    return None
