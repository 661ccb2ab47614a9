"""Scheduling: a plan's steps walked over its fan-out domains.

Each step runs once per scope: the run itself, or one item of a fan-out (an event, a task, one
of its trials). A scope's steps run in plan order; a step that starts a fan-out hands its items
to the executor, a bounded number at a time, and each item's whole chain (scenario → dialog →
verdict) runs while others are in flight, so memory does not grow with the run. A step that
consumes a fan-out from outside it waits until the fan-out is done and gathers its items from the
store. What one item of one step is (its key, reuse, claims, computing it) is
:class:`~intellagent.items.ItemMaker`'s business.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Protocol

from intellagent import bounds
from intellagent.errors import IntellagentError
from intellagent.hashing import content_hash, text_hash
from intellagent.plan import Plan, PlannedStep
from intellagent.results import adapter, annotation_of
from intellagent.steps import UNFINISHED


@dataclass
class Held:
    """A value in flight with its identity (the hash of its JSON) and its item's status."""

    value: Any
    hash: str
    status: str = "ok"
    halt: bool = False
    made: bool = False  # computed now (not reused from the store)


SKIPPED = Held(None, "", "skipped", True)


@dataclass
class Scope:
    """One item of a fan-out domain (the top scope is the run itself)."""

    domain: tuple[str, ...]
    key: str
    pos: str
    parent: "Scope | None"
    element: Held | None = None
    results: dict[str, asyncio.Future] = field(default_factory=dict)
    child_done: dict[str, asyncio.Future] = field(default_factory=dict)

    def ancestor(self, domain: tuple[str, ...]) -> "Scope":
        scope: Scope | None = self
        while scope is not None and scope.domain != domain:
            scope = scope.parent
        assert scope is not None, domain
        return scope


class StepObserver(Protocol):
    """What the scheduler tells about the steps as they go (progress, observer hooks)."""

    def expect(self, step: PlannedStep, n: int) -> None:
        """``n`` more items of ``step`` are known."""

    def item_started(self, step: PlannedStep, scope: Scope) -> None:
        """One item of ``step`` starts: its inputs are ready."""

    def item_done(self, step: PlannedStep, scope: Scope, held: Held) -> None:
        """One item of ``step`` is finished (made, or reused)."""

    def step_started(self, step: PlannedStep) -> None:
        """``step`` starts its first item."""

    def step_done(self, step: PlannedStep) -> None:
        """Every item of ``step`` is finished."""


MakeItem = Callable[[PlannedStep, Scope, dict[str, Any], list], Awaitable[Held]]


class Scheduler:
    """Runs ``steps`` (a plan's, or the part of it a run stops after) over their scopes."""

    def __init__(self, plan: Plan, steps: list[PlannedStep], *, store: Any, run_id: str,
                 make: MakeItem, observer: StepObserver, limit: int) -> None:
        self.plan = plan
        self.steps = steps
        self.store = store
        self.run_id = run_id
        self.make = make
        self.observer = observer
        self.limit = limit
        self.expected: dict[str, int] = {}  # items of each step in this run's fan-outs so far
        self.by_domain: dict[tuple, list[PlannedStep]] = {}
        for s in steps:
            self.by_domain.setdefault(s.domain, []).append(s)
        self.child_roots: dict[tuple, list[str]] = {}
        for domain in self.by_domain:
            if domain:
                roots = self.child_roots.setdefault(domain[:-1], [])
                if domain[-1] not in roots:
                    roots.append(domain[-1])
        self._started: set[str] = set()
        for s in self.by_domain.get((), []):
            observer.expect(s, 1)

    async def run(self) -> None:
        """Every item of every step."""
        await self._run_scope(self._scope((), "", "", None))

    def _scope(self, domain: tuple, key: str, pos: str, parent: Scope | None,
               element: Held | None = None) -> Scope:
        loop = asyncio.get_running_loop()
        scope = Scope(domain, key, pos, parent, element)
        for s in self.by_domain.get(domain, []):
            scope.results[s.name] = loop.create_future()
        for root in self.child_roots.get(domain, []):
            scope.child_done[root] = loop.create_future()
        return scope

    async def _run_scope(self, scope: Scope) -> None:
        roots = self.child_roots.get(scope.domain, [])
        async with asyncio.TaskGroup() as group:
            for step in self.by_domain.get(scope.domain, []):
                held = await self._run_step(step, scope)
                if step.name in roots:
                    if held.halt:
                        scope.child_done[step.name].set_result(None)
                    else:
                        group.create_task(self._run_children(step, scope, held))

    async def _run_children(self, root: PlannedStep, scope: Scope, held: Held) -> None:
        domain = scope.domain + (root.name,)
        elements = list(held.value or [])
        names: list[str] = []
        seen: set[str] = set()
        for i, element in enumerate(elements):
            ident = getattr(element, "id", None)
            name = str(ident) if isinstance(ident, (str, int)) and str(ident) else str(i)
            if name in seen:
                raise IntellagentError(f"two items share the id '{name}'", item=f"step {root.name}")
            seen.add(name)
            names.append(name)
        dump = adapter(root.output.base).dump_json

        def children() -> Iterator[Scope]:
            """Each item's scope, made when an executor takes it: a finished item's values
            are dropped with its scope (they are in the store), so memory does not grow with
            the number of items."""
            for i, (name, element) in enumerate(zip(names, elements)):
                child_key = f"{scope.key}/{name}" if scope.key else name
                yield self._scope(domain, child_key, f"{scope.pos}{i:06d}/", scope,
                                  Held(element, text_hash(dump(element).decode())))

        for s in self.by_domain.get(domain, []):
            self.observer.expect(s, len(names))
            self.expected[s.name] = self.expected.get(s.name, 0) + len(names)
            if self.expected[s.name] > bounds.MAX_ITEMS:  # fan-outs that multiply
                raise IntellagentError(f"more than {bounds.MAX_ITEMS:,} items (a step may make at most "
                                       "that many in a run, docs/input-and-bounds.md)", item=f"step {s.name}")
        unit = "/".join(domain) + "@"
        await self.plan.executor.map(self._run_scope, children(), limit=self.limit,
                                     key=lambda child: unit + child.key)
        scope.child_done[root.name].set_result(None)
        if not scope.key:  # the whole fan-out is done: its steps are finished
            for s in self.steps:
                if s.domain[:1] == (root.name,):
                    self._step_done(s)

    async def _value(self, scope: Scope, source: str) -> Held:
        src = self.plan.steps[source]
        return await scope.ancestor(src.domain).results[source]

    async def _gather(self, scope: Scope, source: str) -> Held:
        """All items of ``source`` under the deepest fan-out both steps share (all of them when
        they share none), once that fan-out is done."""
        src = self.plan.steps[source]
        common: tuple = ()
        for a, b in zip(scope.domain, src.domain):
            if a != b:
                break
            common += (a,)
        anchor = scope.ancestor(common)
        await anchor.child_done[src.domain[len(common)]]
        self.store.flush()
        values, hashes = [], []
        for row in self.store.run_items(self.run_id, source, prefix=anchor.key or None, payload=True):
            if row["halt"] or row["status"] in UNFINISHED:  # an item of this run that did not finish
                continue
            value = adapter(annotation_of(src.output)).validate_json(row["payload"])
            values.extend(value if src.output.many else [value])
            hashes.append(row["value_hash"])
        return Held(values, content_hash(hashes))

    async def _inputs(self, step: PlannedStep, scope: Scope) -> tuple[dict[str, Any], list] | None:
        inputs: dict[str, Any] = {}
        hashes: list = []
        for wire in step.wires:
            src = self.plan.steps[wire.source]
            if wire.mode == "item" and src.output.many:  # the element of that fan-out for this item
                held = scope.ancestor(src.domain + (wire.source,)).element
            elif wire.mode == "gather":
                held = await self._gather(scope, wire.source)
            else:
                held = await self._value(scope, wire.source)
            assert held is not None
            if held.halt:
                return None
            inputs[wire.input] = held.value
            hashes.append([wire.input, held.hash])
        return inputs, hashes

    async def _run_step(self, step: PlannedStep, scope: Scope) -> Held:
        got = await self._inputs(step, scope)
        if got is None:
            held = SKIPPED
        else:
            if step.name not in self._started:
                self._started.add(step.name)
                self.observer.step_started(step)
            self.observer.item_started(step, scope)
            held = await self.make(step, scope, *got)
            self.observer.item_done(step, scope, held)
        scope.results[step.name].set_result(held)
        if got is not None and not scope.domain:
            self._step_done(step)
        return held

    def _step_done(self, step: PlannedStep) -> None:
        if step.name in self._started:
            self.observer.step_done(step)


def first_error(group: BaseExceptionGroup) -> BaseException:  # noqa: F821
    """The exception to report from a task group: an IntellAgent error if there is one."""
    leaves: list[BaseException] = []

    def walk(g: BaseException) -> None:
        if isinstance(g, BaseExceptionGroup):  # noqa: F821
            for e in g.exceptions:
                walk(e)
        else:
            leaves.append(g)

    walk(group)
    for leaf in leaves:
        if isinstance(leaf, IntellagentError):
            return leaf
    return next((leaf for leaf in leaves if not isinstance(leaf, asyncio.CancelledError)), leaves[0])
