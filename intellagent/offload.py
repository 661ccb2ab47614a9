"""Blocking code off the event loop: a sync agent's turn or an environment's tool runs in a pool
of threads sized with the run's concurrency, under a timeout, so one that sleeps or blocks never
stalls the other conversations of the run.

A thread cannot be killed: a call that outlasts its timeout is abandoned (its thread finishes it
in the background and the result is dropped) and the caller is told (:class:`OffloadTimeout`).
The threads are daemons, so an abandoned call never holds the process at exit. Whatever a call
raises, ``KeyboardInterrupt`` and other ``BaseException`` subclasses included, comes back as
:class:`OffloadCrash`, never into the event loop's own thread.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable


class OffloadTimeout(Exception):
    """The call did not return within its timeout."""


class OffloadCrash(Exception):
    """The call raised; ``error`` is what it raised (any ``BaseException``)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


_Job = tuple[Callable[..., Any], tuple, dict, asyncio.AbstractEventLoop, asyncio.Future]


class Offload:
    """Daemon threads for the blocking calls of one run: at most ``workers``, started as calls
    need them and kept for the next ones."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
                  **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a thread: its result, or :class:`OffloadTimeout` or
        :class:`OffloadCrash`. The timeout counts from now (a call waiting for a free thread
        is waiting too)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._grow()
        self._jobs.put((fn, args, kwargs, loop, future))
        try:
            ok, value = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise OffloadTimeout(f"did not return within {timeout:g} s") from None
        if not ok:
            raise OffloadCrash(value)
        return value

    def _grow(self) -> None:
        with self._lock:
            if self._idle > 0 or len(self._threads) >= self.workers:
                self._idle = max(0, self._idle - 1)
                return
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"intellagent-offload-{len(self._threads)}")
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, kwargs, loop, future = job
            try:
                outcome = (True, fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - everything is the caller's to report
                outcome = (False, exc)
            with self._lock:
                self._idle += 1
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:  # the loop is closed: nobody waits for it any more
                pass

    def close(self) -> None:
        """Let the threads end once their current call does (an abandoned one finishes in the
        background)."""
        for _ in self._threads:
            self._jobs.put(None)
        self._threads.clear()


def _settle(future: asyncio.Future, outcome: tuple[bool, Any]) -> None:
    if not future.done():
        future.set_result(outcome)
