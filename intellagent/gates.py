"""Gates: thresholds on a run's metrics that decide a CI job.

A gate is ``PATH OP NUMBER`` (``success >= 0.8``, ``by-category.authentication >= 0.9``,
``invalid-events.items <= 2``), from a pipeline's ``gates:`` list or ``--fail-under PATH=NUMBER``
(``PATH >= NUMBER``). The path names a metric, then optionally a group (a row whose group column
has that value) and a value key; without a key it is the metric's (or the row's) main figure: a
rate, else a ratio or mean, else its only number. A gate whose value does not exist, or is empty
(nothing scored), does not hold. Before the run a gate is refused when it names no metric, a
threshold outside its figure's range (a metric's ``bounds``), or a group or value its metric
cannot have (a metric's ``groups`` and ``values``, where they are known before the run).
"""

from __future__ import annotations

import operator
import re
from typing import Any, Callable

from pydantic import BaseModel

from intellagent.errors import IntellagentError, closest, listed

OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, ">": operator.gt,
                                                   "<=": operator.le, "<": operator.lt}
# a path may hold spaces (a group "authentication/access control"), not the operators' signs
_GATE = re.compile(r"^\s*([^<>=\s](?:[^<>=]*[^<>=\s])?)\s*(>=|<=|>|<)\s*(-?[0-9]*\.?[0-9]+(?:[eE]-?[0-9]+)?)\s*$")
MAIN = ("rate", "value", "mean", "pass^1")  # a metric's (or row's) main figure, by preference


class Gate(BaseModel):
    path: str
    op: str
    threshold: float
    source: str = ""  # where it was set (the pipeline, --fail-under)

    def text(self) -> str:
        return f"{self.path} {self.op} {self.threshold:g}"


class GateResult(BaseModel):
    gate: Gate
    value: float | None
    held: bool
    why: str = ""

    def outcome(self, decided: bool = True) -> str:
        """Its value and verdict, with why it has no value; a run that did not finish decides no
        gate (exit 3). A gate with nothing scored (in its metric, or in its group) FAILED: no
        item shows that the threshold is met."""
        shown = "–" if self.value is None else f"{self.value:.4g}"
        said = "undecided (the run did not finish)" if not decided else "held" if self.held else "FAILED"
        return f"{shown} {said}" + (f" ({self.why})" if self.why else "")

    def line(self, decided: bool = True) -> str:
        """The gate, its value and verdict (the summary's and the HTML report's line)."""
        return f"gate {self.gate.text()}: {self.outcome(decided)}"


def parse_gate(text: str, source: str) -> Gate:
    """``PATH OP NUMBER``; bad input is one line naming where it came from."""
    found = _GATE.match(text)
    if not found:
        raise IntellagentError(f"not a gate: {text!r} (write PATH OP NUMBER, e.g. 'success >= 0.8')",
                               item=source)
    return Gate(path=found.group(1), op=found.group(2), threshold=float(found.group(3)), source=source)


def fail_under(text: str) -> Gate:
    """``--fail-under PATH=NUMBER``: the run fails when PATH is under NUMBER."""
    path, eq, number = text.partition("=")
    expected = IntellagentError("expected PATH=NUMBER, e.g. --fail-under success=0.8",
                                item=f"--fail-under {text}")
    if not eq:
        raise expected
    try:
        return parse_gate(f"{path} >= {number}", f"--fail-under {text}")
    except IntellagentError:  # (its message would quote a gate the user never wrote)
        raise expected from None


def _metric_of(path: str, metrics: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The metric a gate's path names (the longest name that is one: names may hold dots) and
    the rest of the path; None when it names none."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in metrics:
            return ".".join(parts[:cut]), parts[cut:]
    return None


def path_problem(gate: Gate, metrics: dict[str, Any], plan: Any, env: Any) -> str | None:
    """Why ``gate`` names a group or a value its metric cannot have in a run of ``plan`` on
    ``env``, where the metric knows them before the run (its ``groups(plan, env)`` and
    ``values(plan, env)``; None from either: only the run tells); None when it can."""
    found = _metric_of(gate.path, metrics)
    if found is None:
        return None
    name, rest = found
    values = _asked(metrics[name], "values", plan, env)
    own = values.own if values is not None else None
    if not rest:  # its main figure: one of MAIN, or its only value
        if own is None or len(own) < 2 or any(key in own for key in MAIN):
            return None
        return (f"gate '{gate.text()}' names {name}, which has no single figure: name one "
                f"({listed([f'{name}.{k}' for k in own])})")
    groups = _asked(metrics[name], "groups", plan, env)
    per_group = values.per_group if values is not None else None
    head, single = rest[0], len(rest) == 1
    if single and head in (own or []):
        return None
    if per_group == []:  # it has no groups: the path names one of its own values
        if single and own is None:  # (which only the run tells)
            return None
        key = ".".join(rest)
        return (f"gate '{gate.text()}' names value '{key}' of {name}, which it cannot give"
                + _missing(key, own or [], "its values"))
    if groups is not None and head not in groups:
        if own and single:
            return (f"gate '{gate.text()}' names '{head}' of {name}, neither a value it gives nor a "
                    f"group this run can have" + _missing(head, own + list(groups), "its values and groups"))
        return (f"gate '{gate.text()}' names group '{head}' of {name}, which this run cannot have"
                + _missing(head, list(groups), "its groups"))
    key = ".".join(rest[1:])
    if not single and per_group is not None and key not in per_group:
        return (f"gate '{gate.text()}' names value '{key}', which no group of {name} gives"
                + _missing(key, per_group, "a group's values"))
    return None


def _asked(metric: Any, hook: str, plan: Any, env: Any) -> Any:
    """What ``metric``'s optional ``hook(plan, env)`` answers; None when it has none."""
    method = getattr(metric, hook, None)
    return method(plan, env) if callable(method) else None


def gate_problem(gate: Gate, metrics: dict[str, Any]) -> str | None:
    """Why ``gate`` cannot work in a pipeline with ``metrics`` (metric plugins, by name): it
    names no metric, or its threshold lies outside the range of the figure it names (a rate's
    0 to 1: ``success >= 2`` could never hold); None when it can."""
    found = _metric_of(gate.path, metrics)
    if found is None:
        return f"gate '{gate.text()}' names no metric of this pipeline (metrics: {', '.join(metrics) or 'none'})"
    name, rest = found
    bounds = getattr(metrics[name], "bounds", lambda path: None)(rest)
    if bounds is not None and not bounds[0] <= gate.threshold <= bounds[1]:
        return (f"gate '{gate.text()}': {gate.threshold:g} is outside the range of {gate.path} "
                f"({bounds[0]:g} to {bounds[1]:g}; a rate of 80 % is 0.8)")
    return None


def _main(values: dict[str, Any]) -> float | None:
    for key in MAIN:
        if key in values:
            return _number(values[key])
    numbers = [v for v in values.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return float(numbers[0]) if len(numbers) == 1 else None


def _number(value: Any) -> float | None:
    if isinstance(value, dict):  # a rate cell
        value = value.get("rate")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _missing(what: str, names: list[str], kind: str) -> str:
    """Why ``what`` is not found among ``names`` (``kind``: its groups, its values): the nearest
    one and those there are."""
    near = closest(what.split(".")[0], names)
    return (f": did you mean '{near}'?" if near else "") + (f" ({kind}: {listed(names)})" if names else "")


def value_of(path: str, metrics: dict[str, Any]) -> tuple[float | None, str]:
    """The figure ``path`` names in a report's metrics (or None and why not: what is missing,
    with what there is)."""
    found = _metric_of(path, metrics)
    if found is None:
        return None, f"no metric '{path.split('.')[0]}' (metrics: {', '.join(metrics) or 'none'})"
    name, rest = found
    result = metrics[name]
    values = result.values if hasattr(result, "values") else result.get("values", {})
    rows = result.rows if hasattr(result, "rows") else result.get("rows", [])
    columns = result.columns if hasattr(result, "columns") else result.get("columns", [])
    if not rest:
        value = _main(values)
        if value is None and values and not any(key in values for key in MAIN):
            return None, f"no single figure: name one ({', '.join(f'{name}.{k}' for k in values)})"
        return value, "" if value is not None else "nothing scored"
    if len(rest) == 1 and rest[0] in values:
        value = _number(values[rest[0]])
        return value, "" if value is not None else "nothing scored"
    groups = [c.key if hasattr(c, "key") else c["key"] for c in columns
              if (c.group if hasattr(c, "group") else c.get("group"))]
    for row in rows:
        group = rest[0]
        if any(str(row.get(g)) == group for g in groups):
            figures = {k: v for k, v in row.items() if k not in groups}
            if len(rest) == 1:
                value = _main(figures)
                if value is None and not any(key in figures for key in MAIN) \
                        and sum(_number(v) is not None for v in figures.values()) > 1:
                    return None, (f"group '{group}' has no single figure: name one "
                                  f"({', '.join(f'{name}.{group}.{k}' for k in figures)})")
                return value, "" if value is not None else f"nothing scored in group '{group}'"
            key = ".".join(rest[1:])
            if key not in figures:
                return None, (f"group '{group}' of metric '{name}' has no value '{key}'"
                              + _missing(key, list(figures), "its values"))
            value = _number(figures[key])
            return value, "" if value is not None else f"nothing scored in group '{group}'"
    present = list(dict.fromkeys(str(row.get(g)) for row in rows for g in groups))
    if present:
        return None, (f"metric '{name}' has no group '{rest[0]}' in this run"
                      + _missing(rest[0], present, "its groups"))
    if values:
        return None, f"metric '{name}' has no '{'.'.join(rest)}'" + _missing(rest[0], list(values), "its values")
    return None, f"metric '{name}' has no '{'.'.join(rest)}' in this run (nothing was scored)"


def evaluate(gates: list[Gate], metrics: dict[str, Any]) -> list[GateResult]:
    out = []
    for gate in gates:
        value, why = value_of(gate.path, metrics)
        held = value is not None and OPS[gate.op](value, gate.threshold)
        out.append(GateResult(gate=gate, value=value, held=held, why=why))
    return out
