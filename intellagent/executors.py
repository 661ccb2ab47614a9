"""Executors spread a run's per-item work. The runner hands an executor each fan-out: a function
and the items to apply it to, each with a key; the store is the source of truth for what is
finished, so an executor that runs items elsewhere (other processes, a cluster) only has to run
the same function there against the same store.

``local`` (the default) runs items concurrently on this process's event loop, a bounded number at
a time (enough to keep every model slot busy, few enough that databases and transcripts of items
in progress do not pile up in memory).

Executors that share work (:class:`SharedExecutor`: ``processes``, ``ray``) start workers that
run the same plan on the same run and store (:func:`intellagent.worker.run_worker`). Every participant, this
process included, walks each top-level fan-out and takes its items one at a time through the
store (``work_units``): an item is worked on by one live process; an item whose process died is
taken over by another; every participant waits until all items are done before the steps that
gather them. Nothing else changes: item caching, claims on model calls and resume are the
runner's, as in one process.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Iterable, TypeVar

from pydantic import Field

from intellagent.bounds import MAX_PARALLEL
from intellagent.model import StrictModel

T = TypeVar("T")

UNIT_TTL = 60.0  # seconds a taken unit lasts unless its process renews it (every 20 s)
UNIT_POLL = 0.25  # seconds between looks at units other processes work on

#: set inside a unit: its nested fan-outs run locally (the unit is one process's already)
_inside_unit: contextvars.ContextVar[bool] = contextvars.ContextVar("inside_unit", default=False)


@dataclass
class WorkerJob:
    """Everything a worker needs to join a run, picklable: the store, the run, how to rebuild the
    plan (the run's stored spec) and the environment, and which plugins to load besides the
    installed ones."""

    store_url: str
    run_id: str
    environment: dict[str, Any]  # load_environment's arguments: path, data, prompt
    environment_fingerprint: str
    plugin_modules: list[str] = field(default_factory=list)
    cache: bool | None = None
    until: str | None = None
    worker_name: str = "worker"
    limits: dict[str, Any] = field(default_factory=dict)  # the worker's LLM limits (max_concurrency)


@dataclass
class SharedRun:
    """What a sharing executor needs from the run it serves."""

    store: Any
    run_id: str
    owner: str
    job: WorkerJob | None  # None in a worker: it starts no workers of its own


class Executor:
    """Base class of executor plugins (registered with ``register_executors``)."""

    name: ClassVar[str]
    Config: ClassVar[type[StrictModel]]
    shares_work: ClassVar[bool] = False  # items are taken through the store by several processes

    def __init__(self, config: Any) -> None:
        self.config = config

    async def open(self, run: SharedRun) -> None:
        """Called when the run starts (start workers here)."""

    async def close(self) -> None:
        """Called when the run ends, also on error (stop or wait for workers here)."""

    async def renew(self) -> None:
        """Called every few seconds while the run goes on (keep workers' leases alive here)."""

    def model_slots(self, concurrency: int) -> int:
        """Model calls in flight at most over all the processes working on a run, each with
        ``concurrency`` (``llm.max_concurrency``) unless it says otherwise: what ``run
        --estimate`` spreads the calls over."""
        return concurrency

    def items_at_once(self, concurrency: int) -> int:
        """Items of one fan-out in progress at once over all the processes working on a run,
        each with ``concurrency``: what ``run --estimate`` takes a step's items in rounds of."""
        own = getattr(self.config, "items_in_flight", None)
        return own or items_in_flight(fan_out_limit(self.model_slots(concurrency)))

    async def map(self, work: Callable[[T], Awaitable[None]], items: Iterable[T], *,
                  limit: int, key: Callable[[T], str] | None = None) -> None:
        """Apply ``work`` to every item, at most ``limit`` at once; an exception stops the rest
        and is raised. ``key`` names each item (stable across processes), for executors that
        share items between processes."""
        raise NotImplementedError


async def _bounded(work: Callable[[T], Awaitable[None]], items: Iterable[T], limit: int) -> None:
    """``limit`` tasks take the next item in order until none is left. A task gives the event
    loop a turn after each item: work that never suspends (a mock model, cached answers) ran a
    whole fan-out in one turn, so nothing else ran meanwhile (claim renewals, progress) and the
    cancelled timers of its calls' timeouts, each holding its call's context, were never swept."""
    iterator = iter(items)

    async def worker() -> None:
        for item in iterator:  # shared: each item is taken by exactly one worker
            await work(item)
            await asyncio.sleep(0)

    tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, limit))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def fan_out_limit(concurrency: int) -> int:
    """The bound the runner gives a fan-out with ``concurrency`` model slots (``llm.max_concurrency``):
    twice them, at least 4."""
    return max(4, 2 * concurrency)


def model_slots(limit: int) -> int:
    """The run's model slots (``llm.max_concurrency``) from the bound the runner gives a fan-out,
    which is twice them. An item has one model call in flight at a time."""
    return max(2, limit // 2)


def items_in_flight(limit: int) -> int:
    """Items a local fan-out keeps in progress (at most ``limit``): one per model slot and a
    quarter more, so a slot that an item leaves for its own work (a tool call, the store) is taken
    at once. An item holds its state until it ends (a dialog its event database, 0.7 MB for
    airline): at twice the slots, half of the items waited for a slot, holding theirs (128 over
    64 slots, 28 MiB more at the peak of a 1,600-event run than of a 100-event one, at the same
    wall time)."""
    slots = model_slots(limit)
    return min(limit, slots + max(2, slots // 4))


class LocalConfig(StrictModel):
    items_in_flight: int | None = Field(default=None, ge=1, le=MAX_PARALLEL,
                                        description="Items in progress at once per fan-out "
                                        "(default: the model concurrency and a quarter more).")


class LocalExecutor(Executor):
    """Items as asyncio tasks on this process: ``limit`` workers take the next item in order."""

    name = "local"
    Config = LocalConfig

    async def map(self, work: Callable[[T], Awaitable[None]], items: Iterable[T], *,
                  limit: int, key: Callable[[T], str] | None = None) -> None:
        await _bounded(work, items, self.config.items_in_flight or items_in_flight(limit))


class SharedExecutor(Executor):
    """Base of executors whose workers share the run's items through the store. Subclasses start
    and stop the workers (:meth:`open`, :meth:`close`); taking items is done here."""

    shares_work = True

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.run: SharedRun | None = None

    async def open(self, run: SharedRun) -> None:
        self.run = run

    async def renew(self) -> None:
        if self.run is not None:
            self.run.store.renew_units(self.run.owner, UNIT_TTL)

    async def map(self, work: Callable[[T], Awaitable[None]], items: Iterable[T], *,
                  limit: int, key: Callable[[T], str] | None = None) -> None:
        # one item has one model call in flight at a time: as many items as model slots keep
        # them busy, and leave the rest for the other workers to take
        limit = getattr(self.config, "items_in_flight", None) or model_slots(limit)
        if self.run is None or key is None or _inside_unit.get():
            await _bounded(work, items, limit)
            return
        run = self.run
        store = run.store
        waiting: list[tuple[str, T]] = []

        async def one(item: T) -> None:
            unit = key(item)
            state = store.take_unit(run.run_id, unit, run.owner, UNIT_TTL)
            if state == "taken":
                await self._work_unit(work, item, unit)
            elif state == "busy":
                waiting.append((unit, item))

        await _bounded(one, items, limit)
        # the items other processes took: wait for them, and take over any whose process died
        while waiting:
            left: list[tuple[str, T]] = []
            takeover: list[tuple[str, T]] = []
            for unit, item in waiting:
                state = store.take_unit(run.run_id, unit, run.owner, UNIT_TTL)
                (takeover if state == "taken" else left if state == "busy" else []).append((unit, item))
            if takeover:
                await _bounded(lambda pair: self._work_unit(work, pair[1], pair[0]), takeover, limit)
            waiting = left
            if waiting:
                await asyncio.sleep(UNIT_POLL)

    async def _work_unit(self, work: Callable[[T], Awaitable[None]], item: T, unit: str) -> None:
        assert self.run is not None
        token = _inside_unit.set(True)
        try:
            await work(item)
        finally:
            _inside_unit.reset(token)
        self.run.store.finish_unit(self.run.run_id, unit, self.run.owner)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
