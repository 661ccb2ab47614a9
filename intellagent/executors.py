"""Executors spread a run's per-item work. The runner hands an executor each fan-out: a function
and the items to apply it to; the store is the source of truth for what is finished, so an
executor that runs items elsewhere (other processes, a cluster) only has to run the same
function there against the same store.

``local`` (the default) runs items concurrently on this process's event loop, a bounded number at
a time (enough to keep every model slot busy, few enough that databases and transcripts of items
in progress do not pile up in memory).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, ClassVar, Iterable, TypeVar

from pydantic import Field

from intellagent.model import StrictModel

T = TypeVar("T")


class Executor:
    """Base class of executor plugins (registered with ``register_executors``)."""

    name: ClassVar[str]
    Config: ClassVar[type[StrictModel]]

    def __init__(self, config: Any) -> None:
        self.config = config

    async def map(self, work: Callable[[T], Awaitable[None]], items: Iterable[T], *,
                  limit: int) -> None:
        """Apply ``work`` to every item, at most ``limit`` at once; an exception stops the rest
        and is raised."""
        raise NotImplementedError


class LocalConfig(StrictModel):
    items_in_flight: int | None = Field(default=None, ge=1, description="Items in progress at "
                                        "once per fan-out (default: twice the model concurrency).")


class LocalExecutor(Executor):
    """Items as asyncio tasks on this process: ``limit`` workers take the next item in order."""

    name = "local"
    Config = LocalConfig

    async def map(self, work: Callable[[T], Awaitable[None]], items: Iterable[T], *,
                  limit: int) -> None:
        limit = self.config.items_in_flight or limit
        iterator = iter(items)

        async def worker() -> None:
            for item in iterator:  # shared: each item is taken by exactly one worker
                await work(item)

        tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, limit))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
