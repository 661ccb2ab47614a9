"""The call log and the response cache: every model call is a row (the cost report and the
debugging trail), every cacheable answer a row keyed by the hash of its request."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable

import sqlalchemy as sa
from sqlmodel import select

from intellagent.steps import REMADE
from intellagent.store.connection import StoreBase
from intellagent.store.schema import COMPACT_KEYS, CachedResponseRow, ItemRow, LLMCallRow, MigrationRow, RunItemRow


class CallLog(StoreBase):
    """Call rows (buffered, except an answered call's, committed with its cache entry at the end
    of the event loop's turn, or within ``answer_window``), the cost summary, and cache
    look-ups."""

    answer_window = 0.0
    """How long an answered call may wait for its commit inside an event loop, in seconds: the
    answers received meanwhile are committed with it, in one transaction. 0: at the end of the
    loop's turn that received it, before the loop waits for anything. A run sets
    :data:`intellagent.runner.ANSWER_WINDOW` while its steps execute (it flushes when they end,
    however they end): in a 200-event run (2,027 answers), a commit at the end of each turn held
    2.4 answers (870 commits); one within 50 ms holds 8 (251 commits, each writing the pages its
    rows dirty; their CPU 0.19 s → 0.14 s)."""

    _pending_calls: list[dict[str, Any]]
    _answers: list[tuple[dict[str, Any], dict[str, Any] | None]]  # recorded, not committed yet
    _answered: dict[str, dict[str, Any]]  # their cache entries by request hash
    _answers_due: Any  # the event loop a commit of them is scheduled on, or None

    def record_call(self, **fields: Any) -> None:
        """A call that got no answer (or a cache hit): its row, buffered."""
        fields.setdefault("created_at", time.time())
        self._pending_calls.append({**CALL_DEFAULTS, **fields})
        self._maybe_flush()

    def record_answer(self, call: dict[str, Any], *, cache: dict[str, Any] | None = None) -> None:
        """The row of an answered call and, when given, its cache entry (``response``: the
        answer as JSON text), committed in one transaction with the other answers received in
        the same event-loop turn, at its end (within ``answer_window``, when one is set), or at
        once outside an event loop; a flush before then commits them first. An answer that was
        paid for is not lost to a kill after that; meanwhile the cache look-ups of this store
        find it."""
        call.setdefault("created_at", time.time())
        row = {**CALL_DEFAULTS, **call}
        entry = None if cache is None else {**cache, "created_at": call["created_at"]}
        self._answers.append((row, entry))
        if entry is not None:
            self._answered[entry["request_hash"]] = entry
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop in this thread: nothing else to wait for
            self.commit_answers()
            return
        if self._answers_due is not loop:  # (a loop that ended before its commit: not it)
            self._answers_due = loop
            if self.answer_window > 0:
                loop.call_later(self.answer_window, self._commit_answers_due)
            else:
                loop.call_soon(self._commit_answers_due)

    def _commit_answers_due(self) -> None:
        self._answers_due = None
        try:
            self.commit_answers()
        except Exception:  # kept: the next turn with an answer tries again, a flush raises it
            pass

    def commit_answers(self) -> None:
        """Commit the answers recorded and not committed yet (kept, and the error raised, when
        the commit fails)."""
        if not self._answers:
            return
        with self._hot.write() as cur:
            self._hot.execute(cur, INSERT_CALL, [row for row, _ in self._answers])
            entries = [entry for _, entry in self._answers if entry is not None]
            if entries:
                self._hot.execute(cur, self._cache_insert(), entries)
        self._answers = []
        self._answered.clear()

    def calls(self, run_id: str | None = None) -> list[LLMCallRow]:
        self.flush()
        with self.engine.connect() as conn:
            query = select(LLMCallRow)
            if run_id is not None:
                query = query.where(LLMCallRow.run_id == run_id)
            return [LLMCallRow.model_validate(r._mapping) for r in conn.execute(
                query.order_by(LLMCallRow.id))]

    def cost_summary(self, run_id: str, *, made_here: bool = False) -> list[dict[str, Any]]:
        """Calls, tokens and dollars by step and model of everything a run's results took,
        across the processes that made them (a run resumed after a kill counts the calls made
        before it); ``made_here``: only the calls this run made itself."""
        self.flush()
        t = LLMCallRow.__table__.c
        if made_here:
            which = t.run_id == run_id
        else:
            items = sa.select(RunItemRow.__table__.c.key).where(RunItemRow.__table__.c.run_id == run_id)
            which = sa.or_(t.item_key.in_(items), sa.and_(t.run_id == run_id, t.item_key.is_(None)))
        query = (sa.select(t.stage, t.model, sa.func.count().label("calls"),
                           sa.func.sum(sa.cast(t.cached, sa.Integer)).label("cached"),
                           sa.func.sum(t.prompt_tokens).label("prompt_tokens"),
                           sa.func.sum(sa.func.coalesce(t.cached_tokens, 0)).label("cached_tokens"),
                           sa.func.sum(t.completion_tokens).label("completion_tokens"),
                           sa.func.sum(t.cost_usd).label("cost_usd"),
                           sa.func.sum(sa.cast(t.outcome != "ok", sa.Integer)).label("failed"),
                           sa.func.avg(sa.case((t.cached == sa.false(), t.latency_ms))).label("request_ms"),
                           sa.func.avg(sa.case((t.cached == sa.false(), t.queue_ms))).label("queue_ms"))
                 .where(which).group_by(t.stage, t.model).order_by(t.stage, t.model))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def failed_attempts(self) -> dict[str, int]:
        """Attempts of each request that ended without an answer (an infra error, output that
        did not fit), by request hash: a later run sends such a request with a seed of its own."""
        self.flush()
        t = LLMCallRow.__table__.c
        query = (sa.select(t.request_hash, sa.func.sum(t.attempts))
                 .where(t.outcome.in_(("infra-error", "invalid-output"))).group_by(t.request_hash))
        with self.engine.connect() as conn:
            return {h: int(n or 0) for h, n in conn.execute(query)}

    # -- cache -----------------------------------------------------------------------------

    def run_figures(self, run_id: str) -> dict[str, Any]:
        """What a run's items took: items per step (``items``; ``finished``: those that did not
        end unfinished or degraded), calls and tokens per step and role of its finished items
        (every call they took, whichever run made it), and the mean seconds of their calls per
        step and role (``latency``), the calls of each finished item that made any, per step
        (``item_calls``: how much one item's making varies), and the mean seconds from such an
        item's first request to its last answer less its waits for a model slot, per step (``span``).

        A request is counted once per item however often it was recorded (a cache hit, the same
        request sent again under ``--no-cache`` or after a failure), and a call the budget
        refused (nothing sent) not at all: what making the item once takes. An item cut short
        (an infra error, the budget) measures less than its making takes: left out."""
        self.flush()
        ri, t = RunItemRow.__table__.c, LLMCallRow.__table__.c
        sent = t.outcome != "budget-exhausted"
        with self.engine.connect() as conn:
            items = dict(conn.execute(sa.select(ri.step, sa.func.count()).where(ri.run_id == run_id)
                                      .group_by(ri.step)).all())
            finished = dict(conn.execute(sa.select(ri.step, sa.func.count()).where(
                ri.run_id == run_id, ri.status.not_in(REMADE)).group_by(ri.step)).all())
            keys = sa.select(ri.key, ri.step).where(ri.run_id == run_id, ri.status.not_in(REMADE)).subquery()
            requests = (sa.select(t.item_key, t.role, t.request_hash,
                                  sa.func.max(t.prompt_tokens).label("prompt"),
                                  sa.func.max(t.completion_tokens).label("completion"))
                        .where(sent, t.item_key.in_(sa.select(keys.c.key)))
                        .group_by(t.item_key, t.role, t.request_hash).subquery())
            rows = conn.execute(
                sa.select(keys.c.step, requests.c.role, sa.func.count(), sa.func.sum(requests.c.prompt),
                          sa.func.sum(requests.c.completion))
                .join_from(requests, keys, requests.c.item_key == keys.c.key)
                .group_by(keys.c.step, requests.c.role)).all()
            per_item = conn.execute(
                sa.select(keys.c.step, sa.func.count())
                .join_from(requests, keys, requests.c.item_key == keys.c.key)
                .group_by(keys.c.step, keys.c.key)).all()
            latencies = conn.execute(
                sa.select(keys.c.step, t.role, sa.func.avg(t.latency_ms))
                .join_from(LLMCallRow.__table__, keys, t.item_key == keys.c.key)
                .where(sent, t.cached == sa.false()).group_by(keys.c.step, t.role)).all()
            # from an item's first request to its last answer: its calls and what it did between
            # them (an agent that is not our model: its turns, its tools), less its calls' waits
            # for a model slot (the run's load, which the estimate counts apart)
            spans = conn.execute(
                sa.select(keys.c.step, sa.func.max(t.created_at) - sa.func.min(t.created_at - t.latency_ms / 1000.0)
                          - sa.func.sum(sa.func.coalesce(t.queue_ms, 0.0)) / 1000.0,
                          sa.func.max(t.latency_ms) / 1000.0)
                .join_from(LLMCallRow.__table__, keys, t.item_key == keys.c.key)
                .where(sent, t.cached == sa.false()).group_by(keys.c.step, keys.c.key)).all()
        loads: dict[str, dict[str, tuple[int, int, int]]] = {}
        for step, role, calls, prompt, completion in rows:
            loads.setdefault(step, {})[role] = (calls, prompt or 0, completion or 0)
        item_calls: dict[str, list[int]] = {}
        for step, calls in per_item:
            item_calls.setdefault(step, []).append(calls)
        latency: dict[str, dict[str, float]] = {}
        for step, role, ms in latencies:
            if ms:
                latency.setdefault(step, {})[role] = ms / 1000
        span: dict[str, list[float]] = {}
        for step, seconds, longest in spans:
            if seconds is not None:
                span.setdefault(step, []).append(max(seconds, longest or 0.0))
        return {"items": items, "finished": finished, "loads": loads, "latency": latency,
                "item_calls": item_calls, "span": {s: sum(v) / len(v) for s, v in span.items()}}

    def cached_answers(self) -> dict[str, dict[str, tuple[int, int, int]]]:
        """By item key and role, the requests made for an item the store does not hold finished
        whose answers the cache holds (calls, prompt and completion tokens): an item left
        unfinished (a run killed or stopped by its budget) asks them again for free when it is
        made."""
        self.flush()
        t, c, i = LLMCallRow.__table__.c, CachedResponseRow.__table__.c, ItemRow.__table__.c
        finished = sa.select(i.key).where(i.status.not_in(REMADE))
        asked = (sa.select(t.item_key, t.role, t.request_hash)
                 .where(t.item_key.is_not(None), t.item_key.not_in(finished)).distinct().subquery())
        query = (sa.select(asked.c.item_key, asked.c.role, sa.func.count(), sa.func.sum(c.prompt_tokens),
                           sa.func.sum(c.completion_tokens))
                 .join_from(asked, CachedResponseRow.__table__, c.request_hash == asked.c.request_hash)
                 .group_by(asked.c.item_key, asked.c.role))
        found: dict[str, dict[str, tuple[int, int, int]]] = {}
        with self.engine.connect() as conn:
            for key, role, n, prompt, completion in conn.execute(query):
                found.setdefault(key, {})[role] = (n, prompt or 0, completion or 0)
        return found

    def _cache_insert(self) -> Any:
        return self._statement("cache", lambda: self._insert_ignore(CachedResponseRow))

    def cached(self, request_hash: str, legacy: Callable[[], str] | None = None) -> CachedResponseRow | None:
        """The cached answer of a request; ``legacy()``: the request's key in stores made before
        migration 8, looked up when the store has answers cached before it (a hit is then
        copied under ``request_hash``, so it is found directly next time)."""
        pending = self._answered.get(request_hash)
        if pending is not None:  # answered, its commit due (at the turn's end, or the window's)
            return CachedResponseRow.model_validate(pending)
        row = self._hot.read(_CACHE_GET, {"h": request_hash})
        if row is not None:
            return CachedResponseRow.model_validate(dict(zip(_CACHE_COLUMNS, row)))
        if legacy is None or not self.legacy_keys:
            return None
        row = self._hot.read(_CACHE_GET, {"h": legacy()})
        if row is None:
            return None
        entry = {**dict(zip(_CACHE_COLUMNS, row)), "request_hash": request_hash}
        with self._hot.write() as cur:
            self._hot.execute(cur, self._cache_insert(), entry)
        return CachedResponseRow.model_validate(entry)

    @functools.cached_property
    def legacy_keys(self) -> bool:
        """Whether the cache holds answers from before migration 8, under the keys of
        ``ChatRequest.legacy_key`` (asked once per store object: none are written after it)."""
        migrations, cache = MigrationRow.__table__.c, CachedResponseRow.__table__.c
        with self.engine.connect() as conn:
            since = conn.execute(sa.select(migrations.applied_at).where(migrations.id == COMPACT_KEYS)).scalar()
            return since is not None and conn.execute(
                sa.select(cache.request_hash).where(cache.created_at < since).limit(1)).first() is not None

    # -- items -----------------------------------------------------------------------------


_CALL_COLUMNS = [c.name for c in LLMCallRow.__table__.columns if c.name != "id"]
CALL_DEFAULTS = {c: None for c in _CALL_COLUMNS} | {
    "cached": False, "attempts": 1, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
    "latency_ms": 0.0, "queue_ms": 0.0, "cost_usd": 0.0}
INSERT_CALL = sa.insert(LLMCallRow.__table__)
_CACHE_TABLE = CachedResponseRow.__table__
_CACHE_GET = sa.select(_CACHE_TABLE).where(_CACHE_TABLE.c.request_hash == sa.bindparam("h"))
_CACHE_COLUMNS = [c.name for c in _CACHE_TABLE.columns]
