"""What a stage sees while it runs: the environment, the models, the store, the seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from pydantic import BaseModel

from intellagent.artefacts import content_hash
from intellagent.environment import Environment
from intellagent.llm import LLM
from intellagent.store import Store

M = TypeVar("M", bound=BaseModel)


@dataclass
class RunContext:
    env: Environment
    llm: LLM
    store: Store
    seed: int = 0
    run_id: str | None = None
    agent_key: str = ""

    def rng(self, *parts: Any) -> random.Random:
        """A random source for one decision, derived from the run seed and what it is for."""
        return random.Random(content_hash(self.seed, *parts))

    def event_database(self, event: Any) -> Any:
        """A fresh copy of an event's initial database: the seed plus the event's rows."""
        if self.env.db_schema is None:
            return None
        db = self.env.seed_database()
        with db.transaction():
            for row in event.rows:
                db.put(row.table, row.key, row.record)
        return db

    async def item(self, kind: str, key_parts: tuple, model: type[M],
                   compute: Callable[[], Awaitable[M]], *, item: str | None = None,
                   keep: Callable[[M], bool] = lambda value: True) -> M:
        """The finished item for ``key_parts``, from the store when it is there, else computed
        and recorded (when ``keep`` says it is final: an infra error is retried next run)."""
        key = content_hash(kind, self.seed, *key_parts)
        stored = self.store.artefact(kind, key)
        if stored is not None:
            return model.model_validate_json(stored)
        value = await compute()
        if keep(value):
            self.store.put_artefact(kind, key, value.model_dump_json(), run_id=self.run_id, item=item)
        return value
