"""A worker of a sharing executor: a process (or a Ray task) that rebuilds a run's plan and
environment from the store and joins the run, taking items until every fan-out is done.
``python -m intellagent.worker JOB.json`` is how the ``processes`` executor starts one."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from intellagent.environment import load_environment
from intellagent.errors import IntellagentError
from intellagent.executors import WorkerJob
from intellagent.plan import plan_from_data
from intellagent.registry import load_registry
from intellagent.runner import drive, join_run
from intellagent.store import Store


def run_worker(job: WorkerJob) -> dict[str, Any]:
    """A worker's whole life: rebuild the run's plan and environment, join the run on its store,
    work on items until every fan-out is done. Returns a summary (items this worker made)."""
    plugins = [importlib.import_module(name) for name in job.plugin_modules]
    registry = load_registry(plugins=plugins)
    store = Store(job.store_url)
    config = store.run_config(job.run_id)
    plan = plan_from_data(config["spec"], Path(config.get("source") or "pipeline.yaml"), registry,
                          trusted=True)
    env = load_environment(**job.environment)
    if env.fingerprint() != job.environment_fingerprint:
        raise IntellagentError("this worker's copy of the environment differs from the run's "
                               "(install the same version on every node)", item=job.worker_name)
    if job.limits:
        plan.spec.llm = plan.spec.llm.model_copy(update=job.limits)
    return drive(join_run(plan, env, store=store, registry=registry, run_id=job.run_id,
                         cache=job.cache, until=job.until, name=job.worker_name))


def worker_main() -> None:
    """``python -m intellagent.worker JOB.json``: a worker process of ``processes``."""
    job = WorkerJob(**json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
    try:
        summary = run_worker(job)
    except KeyboardInterrupt:
        sys.exit(130)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    worker_main()
