"""Policy checks an environment writes in Python: rules of its policy that can be decided from a
sequence of tool calls and what they did to the database ("a cancelled order cannot be
returned", "only the user's own orders may be changed").

A check is ``fn(trace) -> str | list[str] | None`` marked with :func:`rule_check`; it returns
(or raises :class:`~intellagent.errors.ValidationFailed` with) what breaks the policy, in words a
model can act on, and None when the trace complies. Pipelines that propose or judge action
sequences (a task generator, a critic) run them with :func:`run_actions` and :func:`run_checks`.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable

from intellagent.environment.database import Database
from intellagent.environment.diff import DbDiff, diff_databases
from intellagent.errors import ValidationFailed

_MARK = "__intellagent_rule_check__"


def rule_check(id: str, rule: str) -> Callable[[Callable], Callable]:
    """Mark ``fn(trace)`` as the check of ``rule`` (its text, as the agent's policy states it),
    named ``id`` in feedback and reports."""
    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, (id, rule))
        return fn
    return mark


@dataclass
class Action:
    """One tool call of a trace, as it ran. ``before`` is the database just before it (do not
    change it); ``result`` the tool's output, decoded from JSON when it is JSON."""

    index: int
    name: str
    arguments: dict[str, Any]
    output: str
    error: bool
    writes: bool
    before: Database

    def record(self, table: str, argument: str) -> dict[str, Any] | None:
        """The row of ``table`` the call's ``argument`` names, as it was before the call (None
        when the argument is missing or names no row)."""
        key = self.arguments.get(argument)
        return None if key is None else self.before.get(table, key)

    @property
    def result(self) -> Any:
        try:
            return json.loads(self.output)
        except (TypeError, ValueError):
            return self.output


@dataclass
class Trace:
    """A sequence of tool calls with the states around them. ``context`` holds facts the task
    states besides its calls (e.g. ``{"user_id": ...}``: whom the task is for)."""

    actions: list[Action]
    before: Database
    after: Database
    context: dict[str, Any] = field(default_factory=dict)
    _diff: DbDiff | None = field(default=None, repr=False)

    @property
    def diff(self) -> DbDiff:
        if self._diff is None:
            self._diff = diff_databases(self.before, self.after)
        return self._diff

    def calls(self, *names: str) -> list[Action]:
        """The calls of these tools (of every tool when none is named), in order."""
        return [a for a in self.actions if not names or a.name in names]

    def close(self) -> None:
        seen: set[int] = set()
        for db in [self.before, self.after] + [a.before for a in self.actions]:
            if id(db) not in seen:
                seen.add(id(db))
                db.close()


@dataclass
class RuleCheck:
    id: str
    rule: str
    func: Callable[[Trace], Any]


@dataclass
class CheckFailure:
    """A policy a trace breaks: the check, the policy's text, and what broke it."""

    check: str
    rule: str
    message: str

    def text(self) -> str:
        return f"rule '{self.check}' ({self.rule}): {self.message}"


def collect_checks(module: ModuleType) -> tuple[list[RuleCheck], list[str]]:
    """The marked checks of ``module`` and what is wrong with them (a repeated id, a function
    that does not take exactly one argument)."""
    checks, problems, seen = [], [], set()
    for value in vars(module).values():
        mark = getattr(value, _MARK, None)
        if not mark or not callable(value):
            continue
        check = RuleCheck(mark[0], mark[1], value)
        try:
            params = [p for p in inspect.signature(value).parameters.values()
                      if p.default is inspect.Parameter.empty
                      and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        if len(params) != 1:
            problems.append(f"rule check '{check.id}' ({value.__qualname__}) must take one "
                            "argument, the trace")
        elif check.id in seen:
            problems.append(f"rule check id '{check.id}' is used twice")
        else:
            seen.add(check.id)
            checks.append(check)
    return checks, problems


def run_checks(checks: Iterable[RuleCheck], trace: Trace) -> list[CheckFailure]:
    """Every policy ``trace`` breaks. A check that crashes is reported as a failure of its own
    (the trace is not taken as compliant unchecked)."""
    failures = []
    for check in checks:
        try:
            found = check.func(trace)
        except (ValidationFailed, ValueError, AssertionError) as exc:
            found = str(exc) or type(exc).__name__
        except Exception as exc:
            found = f"the check crashed: {type(exc).__name__}: {exc}"
        for message in ([found] if isinstance(found, str) else list(found or [])):
            failures.append(CheckFailure(check.id, check.rule, message))
    return failures


def run_actions(tools: dict[str, Any], db: Database, calls: Iterable[tuple[str, dict[str, Any]]],
                context: dict[str, Any] | None = None, *, stop_on_error: bool = True) -> Trace:
    """Run ``calls`` ((tool name, arguments) pairs) on ``db`` in order and record the trace.
    ``db`` is changed in place and becomes ``trace.after``; ``trace.before`` is a copy of it as
    it was. An unknown tool or a refused call is recorded with ``error``; with
    ``stop_on_error`` the calls after it are not made."""
    before = db.copy()
    state: Database | None = before  # a snapshot of db as it is now; None once a write moved on
    actions: list[Action] = []
    for index, (name, arguments) in enumerate(calls):
        if state is None:
            state = db.copy()
        tool = tools.get(name)
        arguments = arguments if isinstance(arguments, dict) else {}
        if tool is None:
            actions.append(Action(index, name, dict(arguments), f"Error: unknown tool '{name}'",
                                  True, False, state))
        else:
            result = tool.call(db, arguments)
            actions.append(Action(index, name, dict(arguments), result.output, result.error,
                                  tool.spec.action, state))
            if tool.spec.action and not result.error:
                state = None
        if stop_on_error and actions[-1].error:
            break
    return Trace(actions=actions, before=before, after=db, context=dict(context or {}))
