"""Leases on shared work: claims on items a process is computing (so another waits instead of
paying twice), units of a fan-out shared by an executor's workers, and rate grants shared by
every process of a run. An owner is "host:pid:run"; a lease whose process died is taken over."""

from __future__ import annotations

import os
import socket
import time

import sqlalchemy as sa

from intellagent.store.connection import StoreBase
from intellagent.store.schema import BudgetHoldRow, ClaimRow, RateGrantRow, WorkUnitRow

HOST = socket.gethostname()


def owner_alive(owner: str) -> bool:
    """A claim's owner ("host:pid:run") is alive, as far as this machine can tell."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host != HOST or not pid.isdigit() or alive(int(pid))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Leases(StoreBase):
    """Claims, work units and rate grants."""

    _pending_releases: list[dict[str, object]]  # claims given up, committed with the next flush

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        """Take ``key`` for ``owner`` unless another live owner holds it (an expired claim is
        taken over: its process died)."""
        now = time.time()
        with self._hot.write(lock=True) as cur:
            self._hot.execute(cur, _CLAIM_GET, {"k": key})
            row = cur.fetchone()
            if row is not None and row[0] != owner and row[1] > now and owner_alive(row[0]):
                return False
            self._hot.execute(cur, _CLAIM_PUT if row is None else _CLAIM_TAKE,
                              {"k": key, "o": owner, "e": now + ttl})
        return True

    def renew(self, owner: str, ttl: float) -> None:
        c = ClaimRow.__table__.c
        with self.engine.begin() as conn:
            conn.execute(sa.update(ClaimRow.__table__).where(c.owner == owner)
                         .values(expires_at=time.time() + ttl))

    def release(self, key: str, owner: str) -> None:
        """Give ``key`` up, after committing what was made for it: the claim goes with the next
        commit of buffered rows, in the same transaction as the item it was taken for."""
        self._pending_releases.append({"k": key, "o": owner})
        self._maybe_flush()

    # -- shared work -------------------------------------------------------------------------

    def take_unit(self, run_id: str, unit: str, owner: str, ttl: float) -> str:
        """Try to take a unit of a shared fan-out: "taken" (it is ``owner``'s now: a new one, or
        one whose owner died or let it expire), "done", or "busy" (a live owner has it)."""
        now = time.time()
        with self._hot.write(lock=True) as cur:
            self._hot.execute(cur, _UNIT_GET, {"r": run_id, "u": unit})
            row = cur.fetchone()
            if row is not None:
                if row[2]:
                    return "done"
                if row[0] != owner and row[1] > now and owner_alive(row[0]):
                    return "busy"
            self._hot.execute(cur, _UNIT_PUT if row is None else _UNIT_TAKE,
                              {"r": run_id, "u": unit, "o": owner, "e": now + ttl})
        return "taken"

    def finish_unit(self, run_id: str, unit: str, owner: str) -> None:
        """Mark a unit done, after committing everything made for it."""
        self.flush()
        with self._hot.write() as cur:
            self._hot.execute(cur, _UNIT_DONE, {"r": run_id, "u": unit, "o": owner})

    def renew_units(self, owner: str, ttl: float) -> None:
        t = WorkUnitRow.__table__.c
        with self.engine.begin() as conn:
            conn.execute(sa.update(WorkUnitRow.__table__).where(t.owner == owner, t.done == sa.false())
                         .values(expires_at=time.time() + ttl))

    def take_rate(self, bucket: str, tokens: int, rpm: int | None, tpm: int | None,
                  window: float = 60.0) -> float:
        """Grant one request of ``tokens`` under limits shared by every process on this store
        (a sliding window): 0 when granted, else the seconds to wait before asking again."""
        now = time.time()
        g = RateGrantRow.__table__.c
        with self._writing() as conn:
            conn.execute(sa.delete(RateGrantRow.__table__).where(g.bucket == bucket, g.at <= now - window))
            used, spent, oldest = conn.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(g.tokens), 0), sa.func.min(g.at))
                .where(g.bucket == bucket)).one()
            fits = (rpm is None or used < rpm) and (tpm is None or used == 0 or spent + tokens <= tpm)
            if fits:
                conn.execute(sa.insert(RateGrantRow.__table__).values(bucket=bucket, at=now, tokens=tokens))
                return 0.0
        return max(0.01, (oldest + window) - now) if oldest is not None else 0.05

    def hold_budget(self, run_id: str, usd: float, tokens: int, budget_usd: float | None,
                    budget_tokens: int | None, ttl: float) -> tuple[int | None, bool]:
        """Hold an attempt's worst case against a budget shared by every process of the run:
        what the run's calls spent and the holds of the attempts in flight, with this one, must
        fit, and no call of the run may have been refused. (The hold's id or None; whether other
        holds are in flight, which may give back.) A hold that does not fit with none in flight
        is the run's refusal, recorded in the same transaction: no hold is granted after it."""
        now = time.time()
        h = BudgetHoldRow.__table__.c
        with self._writing() as conn:
            conn.execute(sa.delete(BudgetHoldRow.__table__).where(h.run_id == run_id, h.expires_at <= now))
            used_usd, used_tokens, holding, refused = conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(sa.case((h.refused, 0.0), else_=h.usd)), 0.0),
                          sa.func.coalesce(sa.func.sum(sa.case((h.refused, 0), else_=h.tokens)), 0),
                          sa.func.count(h.expires_at),
                          sa.func.coalesce(sa.func.sum(sa.case((h.refused, 1), else_=0)), 0))
                .where(h.run_id == run_id)).one()
            if refused:
                return None, False
            fits = (budget_usd is None or used_usd + usd <= budget_usd) and \
                (budget_tokens is None or used_tokens + tokens <= budget_tokens)
            if not fits:
                if not holding:  # nothing in flight can give back: the run's refusal, at once
                    conn.execute(sa.insert(BudgetHoldRow.__table__).values(
                        run_id=run_id, usd=usd, tokens=tokens, refused=True))
                return None, holding > 0
            hold = conn.execute(sa.insert(BudgetHoldRow.__table__).values(
                run_id=run_id, usd=usd, tokens=tokens, expires_at=now + ttl)).inserted_primary_key[0]
        return hold, holding > 0

    def settle_budget(self, run_id: str, holds: list[int], usd: float, tokens: int) -> None:
        """Holds end: the first leaves what its attempt spent (kept even if the hold had
        expired meanwhile), the others go."""
        if not holds:
            return
        h = BudgetHoldRow.__table__.c
        with self._writing() as conn:
            updated = conn.execute(sa.update(BudgetHoldRow.__table__).where(h.id == holds[0])
                                   .values(usd=usd, tokens=tokens, expires_at=None)).rowcount
            if not updated:
                conn.execute(sa.insert(BudgetHoldRow.__table__).values(run_id=run_id, usd=usd, tokens=tokens))
            if holds[1:]:
                conn.execute(sa.delete(BudgetHoldRow.__table__).where(h.id.in_(holds[1:])))

    def refuse_budget(self, run_id: str, usd: float, tokens: int) -> None:
        """Record a call the run's shared budget could not pay (its worst case); the first one
        recorded is the run's refusal."""
        h = BudgetHoldRow.__table__.c
        with self._writing() as conn:
            if conn.execute(sa.select(h.id).where(h.run_id == run_id, h.refused).limit(1)).first() is None:
                conn.execute(sa.insert(BudgetHoldRow.__table__).values(
                    run_id=run_id, usd=usd, tokens=tokens, refused=True))

    def budget_refusal(self, run_id: str) -> tuple[float, int] | None:
        """The worst case of the call the run's shared budget refused (None before any)."""
        h = BudgetHoldRow.__table__.c
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(h.usd, h.tokens).where(h.run_id == run_id, h.refused)
                               .order_by(h.id).limit(1)).first()
        return None if row is None else (float(row[0]), int(row[1]))

    def budget_spent(self, run_id: str) -> tuple[float, int]:
        """What the calls of a run that shares its budget spent, in every process."""
        h = BudgetHoldRow.__table__.c
        with self.engine.connect() as conn:
            usd, tokens = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(h.usd), 0.0),
                                                 sa.func.coalesce(sa.func.sum(h.tokens), 0))
                                       .where(h.run_id == run_id, h.expires_at.is_(None),
                                              h.refused == sa.false())).one()
        return float(usd), int(tokens)

    # -- artefacts ---------------------------------------------------------------------------


_CLAIMS = ClaimRow.__table__
_CLAIM_GET = sa.select(_CLAIMS.c.owner, _CLAIMS.c.expires_at).where(_CLAIMS.c.key == sa.bindparam("k"))
_CLAIM_PUT = sa.insert(_CLAIMS).values(key=sa.bindparam("k"), owner=sa.bindparam("o"),
                                       expires_at=sa.bindparam("e"))
_CLAIM_TAKE = sa.update(_CLAIMS).where(_CLAIMS.c.key == sa.bindparam("k")).values(
    owner=sa.bindparam("o"), expires_at=sa.bindparam("e"))
_UNITS = WorkUnitRow.__table__
_UNIT_KEY = (_UNITS.c.run_id == sa.bindparam("r")) & (_UNITS.c.unit == sa.bindparam("u"))
_UNIT_GET = sa.select(_UNITS.c.owner, _UNITS.c.expires_at, _UNITS.c.done).where(_UNIT_KEY)
_UNIT_PUT = sa.insert(_UNITS).values(run_id=sa.bindparam("r"), unit=sa.bindparam("u"),
                                     owner=sa.bindparam("o"), expires_at=sa.bindparam("e"), done=sa.false())
_UNIT_TAKE = sa.update(_UNITS).where(_UNIT_KEY).values(owner=sa.bindparam("o"), expires_at=sa.bindparam("e"))
_UNIT_DONE = sa.update(_UNITS).where(_UNIT_KEY).values(done=sa.true())
RELEASE = sa.delete(_CLAIMS).where(_CLAIMS.c.key == sa.bindparam("k"), _CLAIMS.c.owner == sa.bindparam("o"))
