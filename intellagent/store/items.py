"""Step items in the store: each finished item under the content hash of everything that made
it, which items each run used or made, and keyed partial results (artefacts, e.g. memos)."""

from __future__ import annotations

import time
from typing import Any, Iterator

import sqlalchemy as sa

from intellagent.steps import REMADE
from intellagent.store.connection import StoreBase
from intellagent.store.schema import ArtefactRow, ItemRow, RunItemRow


class ItemRecords(StoreBase):
    """Items, run items and artefacts. All three are buffered and committed with the model calls
    that made them (:meth:`intellagent.store.Store.flush`)."""

    _pending_items: dict[str, dict[str, Any]]
    _pending_artefacts: dict[tuple[str, str], dict[str, Any]]
    _pending_run_items: list[dict[str, Any]]
    _replacing: set[str]  # pending items that replace a finished one (made again on purpose)

    def item(self, key: str) -> ItemRow | None:
        """A finished item by its key, or None."""
        pending = self._pending_items.get(key)
        if pending is not None:
            return ItemRow.model_validate(pending)
        row = self._hot.read(_ITEM_GET, {"k": key})
        return ItemRow.model_validate(dict(zip(_ITEM_COLUMNS, row))) if row else None

    def put_item(self, *, key: str, step: str, status: str, halt: bool, note: str, scores: str,
                 payload: str, value_hash: str, warnings: str = "[]", run_id: str | None = None,
                 replace: bool = False) -> None:
        """Record a finished item made by ``run_id`` (buffered; committed after the calls that
        made it). An item is written once, unless ``replace``: it was made again on purpose
        (``--no-cache``)."""
        row = dict(key=key, step=step, status=status, halt=halt, note=note, scores=scores,
                   payload=payload, value_hash=value_hash, created_at=time.time(), warnings=warnings,
                   run_id=run_id)
        if replace:
            self._pending_items[key] = row
            self._replacing.add(key)
        else:
            self._pending_items.setdefault(key, row)
        self._maybe_flush()

    def _item_writes(self, items: dict[str, dict[str, Any]]) -> list[tuple[Any, list[dict[str, Any]]]]:
        """The statements writing buffered ``items``: each once, or replacing."""
        replacing, self._replacing = self._replacing, set()
        return [(self._statement("item", self._upsert_item), [r for k, r in items.items() if k not in replacing]),
                (self._statement("item-replace", lambda: self._upsert_item(replace=True)),
                 [r for k, r in items.items() if k in replacing])]

    def record_run_item(self, run_id: str, step: str, item: str, pos: str, key: str,
                        status: str) -> None:
        """Note that ``run_id`` used (or made) item ``key`` as ``step``'s item ``item``."""
        self._pending_run_items.append(dict(run_id=run_id, step=step, item=item, pos=pos, key=key,
                                            status=status))
        self._maybe_flush()

    def run_items(self, run_id: str, step: str | None = None, *, prefix: str | None = None,
                  payload: bool = False, scored: bool = False) -> Iterator[dict[str, Any]]:
        """The items of a run in position order (step, item, status, scores, and the payload when
        asked), streamed from the store; ``scored``: only those with scores."""
        self.flush()
        stmt = _run_items_statement(step is not None, bool(prefix), payload, scored)
        params: dict[str, Any] = {"r": run_id}
        if step is not None:
            params["s"] = step
        if prefix:
            params |= {"p": prefix + "/", "n": len(prefix) + 1}
        if not self._hot.sqlite:  # streamed by a server-side cursor
            with self.engine.connect() as conn:
                for row in conn.execution_options(yield_per=500).execute(stmt, params):
                    yield dict(row._mapping)
            return
        # SQLite: the DBAPI cursor streams rows itself; SQLAlchemy's rows cost more than the read
        text, keys = self._hot.sql(stmt, params)
        conn = self.engine.raw_connection()
        try:
            cur = conn.cursor()
            cur.execute(text, self._hot.args(keys, params))
            names = [d[0] for d in cur.description]
            while rows := cur.fetchmany(500):
                for row in rows:
                    item = dict(zip(names, row))
                    item["halt"] = bool(item["halt"])
                    yield item
        finally:
            conn.close()

    def _upsert_item(self, replace: bool = False) -> Any:
        """An item is written once; only an unfinished one (an infra error, a budget stop) or a
        degraded one is replaced by the version a later run makes (any, with ``replace``)."""
        table = ItemRow.__table__
        stmt = self._dialect_insert(table)
        where = None if replace else sa.or_(*(table.c.status == sa.literal_column(f"'{s}'") for s in REMADE))
        return stmt.on_conflict_do_update(
            index_elements=["key"], where=where,
            set_={c: getattr(stmt.excluded, c) for c in ("step", "status", "halt", "note", "scores",
                                                          "payload", "value_hash", "created_at",
                                                          "warnings", "run_id")})

    def _upsert_run_item(self) -> Any:
        stmt = self._dialect_insert(RunItemRow.__table__)
        return stmt.on_conflict_do_update(index_elements=["run_id", "step", "item"],
                                          set_={"key": stmt.excluded.key, "pos": stmt.excluded.pos,
                                                "status": stmt.excluded.status})

    # -- claims ----------------------------------------------------------------------------
    def reused(self, run_id: str, step: str) -> dict[str, int]:
        """The items of ``step`` that ``run_id`` took from earlier runs: how many from each (the
        run that made them; ``earlier`` for items made before the store recorded it)."""
        self.flush()
        ri, it = RunItemRow.__table__.c, ItemRow.__table__.c
        query = (sa.select(it.run_id, sa.func.count()).join_from(RunItemRow.__table__, ItemRow.__table__, ri.key == it.key)
                 .where(ri.run_id == run_id, ri.step == step,
                        sa.or_(it.run_id.is_(None), it.run_id != run_id))
                 .group_by(it.run_id))
        with self.engine.connect() as conn:
            return {(made or "earlier"): n for made, n in conn.execute(query)}

    def artefact(self, kind: str, key: str) -> str | None:
        """The JSON payload of a finished item, or None."""
        row = self._hot.read(_ARTEFACT_GET, {"k": kind, "h": key})
        if row:
            return row[0]
        pending = self._pending_artefacts.get((kind, key))  # (one in the store is kept: it comes first)
        return pending["payload"] if pending is not None else None

    def put_artefact(self, kind: str, key: str, payload: str, *, run_id: str | None = None,
                     item: str | None = None) -> None:
        """Record a finished item (buffered: committed with the next flush, after the model calls
        that made it, so a finished item's calls are always in the log); an existing item is left
        as it is. A step that remembers many (a graph's edge scores, 300 for airline's) commits
        them together, not each in a transaction of its own."""
        self._pending_artefacts.setdefault((kind, key), dict(
            kind=kind, key=key, run_id=run_id, item=item, payload=payload, created_at=time.time()))
        self._maybe_flush()

    def _artefact_insert(self) -> Any:
        return self._statement("artefact", lambda: self._insert_ignore(ArtefactRow))


_RUN_ITEMS: dict[tuple[bool, bool, bool, bool], Any] = {}


def _run_items_statement(step: bool, prefix: bool, payload: bool, scored: bool) -> Any:
    """The query of :meth:`Store.run_items`, one per shape, made once (the compiled-SQL cache
    is keyed by the statement's identity)."""
    found = _RUN_ITEMS.get((step, prefix, payload, scored))
    if found is None:
        ri, it = RunItemRow.__table__.c, ItemRow.__table__.c
        columns = [ri.step, ri.item, ri.pos, ri.key, ri.status, it.halt, it.note, it.scores,
                   it.value_hash, it.warnings] + ([it.payload] if payload else [])
        query = sa.select(*columns).join_from(RunItemRow.__table__, ItemRow.__table__,
                                              ri.key == it.key).where(ri.run_id == sa.bindparam("r"))
        if step:
            query = query.where(ri.step == sa.bindparam("s"))
        if prefix:  # the items under ``prefix/``: substr, as startswith's LIKE needs its value escaped
            query = query.where(sa.func.substr(ri.item, sa.literal_column("1"), sa.bindparam("n"))
                                == sa.bindparam("p"))
        if scored:  # an item without scores stores "[]" (a metric's pass reads only the scored)
            query = query.where(it.scores != sa.literal_column("'[]'"))
        found = _RUN_ITEMS[(step, prefix, payload, scored)] = query.order_by(ri.pos, ri.step)
    return found


_ITEM_GET = sa.select(ItemRow.__table__).where(ItemRow.__table__.c.key == sa.bindparam("k"))
_ITEM_COLUMNS = [c.name for c in ItemRow.__table__.columns]
_ART = ArtefactRow.__table__
_ARTEFACT_GET = sa.select(_ART.c.payload).where(_ART.c.kind == sa.bindparam("k"),
                                                _ART.c.key == sa.bindparam("h"))

