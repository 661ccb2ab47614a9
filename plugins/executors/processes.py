"""``processes``: worker processes on this machine, each running the run's plan on the shared
store and taking items through it, so every core works."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from intellagent.bounds import MAX_PARALLEL
from intellagent.errors import IntellagentError
from intellagent.executors import SharedExecutor, SharedRun, default_workers
from intellagent.model import StrictModel


#: Processes on one machine: each is a whole interpreter with its own copy of the run's plan.
MAX_WORKERS = 256


class ProcessesConfig(StrictModel):
    workers: int | None = Field(default=None, ge=1, le=MAX_WORKERS, description="Processes working "
                                "on the run, this one included (default: one per core).")
    items_in_flight: int | None = Field(default=None, ge=1, le=MAX_PARALLEL, description="Items in "
                                        "progress at once per process (default: twice the model "
                                        "concurrency).")


class ProcessesExecutor(SharedExecutor):
    """This process and ``workers - 1`` more (``python -m intellagent.worker``), each with
    its own event loop and model concurrency (``llm.max_concurrency`` per process)."""

    name = "processes"
    Config = ProcessesConfig

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        self._folder: tempfile.TemporaryDirectory | None = None

    def model_slots(self, concurrency: int) -> int:
        return (self.config.workers or default_workers()) * concurrency

    async def open(self, run: SharedRun) -> None:
        await super().open(run)
        if run.job is None:  # a worker starts no workers
            return
        if run.store.url in ("sqlite://", "sqlite:///:memory:"):
            raise IntellagentError("the processes executor needs a store its workers can open: a "
                                   "workspace, or a PostgreSQL URL (not an in-memory store)",
                                   item="executor")
        self._folder = tempfile.TemporaryDirectory(prefix="intellagent-workers-")
        for i in range(1, (self.config.workers or default_workers())):
            job = dataclasses.replace(run.job, worker_name=f"process-{i}")
            path = Path(self._folder.name) / f"job-{i}.json"
            path.write_text(json.dumps(dataclasses.asdict(job)))
            log = Path(self._folder.name) / f"worker-{i}.log"
            with log.open("w") as err:
                proc = subprocess.Popen([sys.executable, "-m", "intellagent.worker", str(path)],
                                        stdout=subprocess.PIPE, stderr=err, text=True)
            self.procs.append((proc, log))

    async def close(self) -> None:
        try:
            for proc, log in self.procs:
                await asyncio.to_thread(proc.wait)
                if proc.returncode != 0:  # its items were taken over; say why it stopped
                    tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                    print(f"warning: worker process {proc.pid} stopped with exit code "
                          f"{proc.returncode}{': ' + tail[0] if tail else ''}", file=sys.stderr)
        except BaseException:
            for proc, _ in self.procs:
                proc.kill()
            raise
        finally:
            for proc, _ in self.procs:
                if proc.stdout:
                    proc.stdout.close()
            self.procs = []
            if self._folder is not None:
                self._folder.cleanup()
                self._folder = None
