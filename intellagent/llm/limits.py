"""Limits shared by every stage of a run: requests and tokens per minute."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any


class RateLimiter:
    """A sliding one-minute window over requests and (estimated) tokens."""

    WINDOW = 60.0

    def __init__(self, requests_per_minute: int | None = None,
                 tokens_per_minute: int | None = None) -> None:
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._events: deque[tuple[float, int]] = deque()
        self._tokens = 0
        self._lock = asyncio.Lock()
        self._shared: tuple | None = None  # (store, bucket): limits held across processes

    def share(self, store: Any, bucket: str) -> None:
        """Hold the limits across every process that shares ``bucket`` on ``store`` (the
        workers of one run): each request is also granted by the store's ledger."""
        self._shared = (store, bucket)

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    async def acquire(self, tokens: int) -> None:
        if not self.active:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._events and now - self._events[0][0] >= self.WINDOW:
                    self._tokens -= self._events.popleft()[1]
                fits_requests = self.rpm is None or len(self._events) < self.rpm
                fits_tokens = (self.tpm is None or not self._events
                               or self._tokens + tokens <= self.tpm)
                if fits_requests and fits_tokens:
                    self._events.append((now, tokens))
                    self._tokens += tokens
                    break
                await asyncio.sleep(max(0.01, self.WINDOW - (now - self._events[0][0])))
        if self._shared is not None:
            store, bucket = self._shared
            while True:
                wait = store.take_rate(bucket, tokens, self.rpm, self.tpm, self.WINDOW)
                if not wait:
                    return
                await asyncio.sleep(min(wait, 1.0))
