"""The store's record of runs: when each started, in which process, with which config, and how
it ended; which run a new attempt resumes."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import sqlalchemy as sa

from intellagent.errors import IntellagentError
from intellagent.steps import REMADE
from intellagent.store.connection import StoreBase, safe_url
from intellagent.store.leases import HOST, alive
from intellagent.store.schema import RunItemRow, RunRow


class RunRecords(StoreBase):
    """Runs: start, reap the dead, find the one to resume, resolve ``latest``, record the end."""

    def start_run(self, *, environment: str | None = None, seed: int = 0,
                  config: dict | None = None, run_id: str | None = None) -> str:
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.reap()
        with self.engine.begin() as conn:
            conn.execute(sa.insert(RunRow.__table__).values(
                id=run_id, created_at=time.time(), environment=environment, seed=seed,
                config=json.dumps(config or {}), pid=os.getpid(), host=HOST))
        return run_id

    def reap(self) -> list[str]:
        """Runs still marked running whose process (on this machine) is gone: interrupted."""
        t = RunRow.__table__.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.id, t.pid).where(t.status == "running", t.host == HOST)).all()
        dead = [run_id for run_id, pid in rows if pid is not None and not alive(pid)]
        for run_id in dead:
            self.set_run_status(run_id, "interrupted")
        return dead

    def resumable_run(self, identity: str, *, look_back: int = 50) -> tuple[str, str] | None:
        """The latest run with this identity that did not finish (killed, failed, stopped by
        the budget, or done with items that could not finish), unless a live process runs it
        now: (its id, the folder its report goes to)."""
        self.reap()
        t = RunRow.__table__.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.id, t.status, t.config).order_by(t.created_at.desc())
                                .limit(look_back)).all()
            for run_id, status, config in rows:
                data = json.loads(config or "{}")
                if data.get("identity") != identity:
                    continue
                if status == "running":
                    return None  # another process is on it now: this one is a run of its own
                unfinished = status in ("interrupted", "failed", "budget-exhausted") or \
                    conn.execute(sa.select(RunItemRow.__table__.c.key).where(
                        RunItemRow.__table__.c.run_id == run_id,
                        RunItemRow.__table__.c.status.in_(REMADE)).limit(1)).first() is not None
                return (run_id, data.get("report_folder") or run_id) if unfinished else None
        return None

    def latest_finished_run(self, pipeline: str, *, environment_hash: str | None = None,
                            look_back: int = 50) -> str | None:
        """The latest run of ``pipeline`` that finished with its report (not a mutant's run, not a
        replay: they measure another agent), on the environment whose fingerprint is
        ``environment_hash`` when given (another world's graph and dialogs cost otherwise), or None."""
        t = RunRow.__table__.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.id, t.config).where(t.status == "done")
                                .order_by(t.created_at.desc()).limit(look_back)).all()
        for run_id, config in rows:
            data = json.loads(config or "{}")
            if data.get("pipeline") == pipeline and data.get("info") and not data.get("until") \
                    and not data.get("mutant") and not data.get("replays") \
                    and (environment_hash is None or environment_hash ==
                         ((data["info"].get("provenance") or {}).get("environment_hash"))):
                return run_id
        return None

    def resolve_run(self, run: str) -> str:
        """A run id, or ``latest``."""
        self.reap()
        with self.engine.connect() as conn:
            if run == "latest":
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .order_by(RunRow.__table__.c.created_at.desc()).limit(1)).first()
            else:
                row = conn.execute(sa.select(RunRow.__table__.c.id)
                                   .where(RunRow.__table__.c.id == run)).first()
        if row is None:
            raise IntellagentError(f"no run '{run}' in this workspace", item=safe_url(self.url))
        return row[0]

    def set_run_status(self, run_id: str, status: str, **config: Any) -> None:
        """Record how a run ended; ``config`` entries are added to its stored config."""
        values: dict[str, Any] = {"status": status}
        if config:
            values["config"] = json.dumps(self.run_config(run_id) | config)
        with self.engine.begin() as conn:
            conn.execute(sa.update(RunRow.__table__).where(RunRow.__table__.c.id == run_id)
                         .values(**values))

    def update_run_config(self, run_id: str, **config: Any) -> None:
        """Add ``config`` entries to a run's stored config (what was found about it later: people's
        labels, mutants), its status unchanged."""
        with self.engine.begin() as conn:
            conn.execute(sa.update(RunRow.__table__).where(RunRow.__table__.c.id == run_id)
                         .values(config=json.dumps(self.run_config(run_id) | config)))

    def run_config(self, run_id: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(RunRow.__table__.c.config)
                               .where(RunRow.__table__.c.id == run_id)).first()
        return json.loads(row[0]) if row and row[0] else {}
