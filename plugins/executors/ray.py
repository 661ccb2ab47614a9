"""``ray``: the run's items spread over a Ray cluster. Each Ray task is a worker running the
run's plan on the shared store (PostgreSQL on a real cluster: every node must reach it) and
taking items through it; this process works too unless ``driver_works: false``."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
from typing import Any

from pydantic import Field, field_validator

from intellagent.bounds import MAX_PARALLEL
from intellagent.errors import IntellagentError
from intellagent.executors import SharedExecutor, SharedRun
from intellagent.worker import run_worker
from intellagent.model import StrictModel


ADDRESS = re.compile(r"(ray://)?[A-Za-z0-9.\-\[\]:]+:\d{1,5}")


class RayConfig(StrictModel):
    address: str | None = Field(default=None, description="The cluster: 'auto' (the one this "
                                "machine is part of), 'ray://HOST:10001' (Ray Client), or empty to "
                                "start a local Ray instance.")
    workers: int = Field(default=2, ge=1, le=MAX_PARALLEL, description="Ray tasks working on the run.")
    num_cpus: float = Field(default=1.0, gt=0, le=MAX_PARALLEL,
                            description="CPUs Ray reserves per worker.")
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_PARALLEL,
                                        description="Model requests in flight "
                                        "per worker (default: llm.max_concurrency).")
    items_in_flight: int | None = Field(default=None, ge=1, le=MAX_PARALLEL,
                                        description="Items in progress at "
                                        "once per worker.")
    driver_works: bool = Field(default=True, description="This process takes items too.")
    runtime_env: dict[str, Any] | None = Field(default=None, description="Ray runtime "
                                               "environment for the workers, e.g. {pip: "
                                               "[intellagent, my-envs]}.")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        """The forms Ray takes: auto, local, ray://HOST:PORT (Ray Client) or HOST:PORT."""
        if value in (None, "", "auto", "local") or ADDRESS.fullmatch(value):
            return value
        raise ValueError(f"'{value}' is not a Ray address: auto, ray://HOST:PORT or HOST:PORT")


class RayExecutor(SharedExecutor):
    name = "ray"
    Config = RayConfig

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.refs: list[Any] = []

    def model_slots(self, concurrency: int) -> int:
        driver = concurrency if self.config.driver_works else 0
        return driver + self.config.workers * (self.config.max_concurrency or concurrency)

    async def open(self, run: SharedRun) -> None:
        await super().open(run)
        if run.job is None:
            return
        try:
            import ray
        except ImportError:
            raise IntellagentError("the ray executor needs Ray: pip install 'intellagent[ray]'",
                                   item="executor") from None
        if run.store.url.startswith("sqlite") and self.config.address not in (None, "", "local"):
            print("warning: a SQLite store is reachable only on this machine; give the run a "
                  "PostgreSQL store (--store) for workers on other nodes", file=sys.stderr)
        if not ray.is_initialized():
            try:
                ray.init(address=self.config.address or None, runtime_env=self.config.runtime_env,
                         include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise IntellagentError(f"cannot reach the Ray cluster {self.config.address or '(local)'}: "
                                       f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                                       item="executor.with.address") from None
        task = ray.remote(num_cpus=self.config.num_cpus, max_retries=0)(run_worker)
        limits = {"max_concurrency": self.config.max_concurrency} if self.config.max_concurrency else {}
        self.refs = [task.remote(dataclasses.replace(run.job, worker_name=f"ray-{i}", limits=limits))
                     for i in range(self.config.workers)]
        if not self.config.driver_works:
            await asyncio.to_thread(self._wait)

    def _wait(self) -> list[Any]:
        import ray

        out = []
        for ref in self.refs:
            try:
                out.append(ray.get(ref))
            except Exception as exc:  # a worker that died: its items were taken over
                print(f"warning: a Ray worker stopped: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return out

    async def close(self) -> None:
        if self.refs:
            self.summaries = await asyncio.to_thread(self._wait)
            self.refs = []
