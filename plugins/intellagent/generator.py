"""``symbolic-events``: a scenario per sampled policy set, then concrete rows for it.

1. The model writes the scenario for the simulated user, the expected agent behaviour per policy
   and the entities involved as symbols (U1, R1, …) with their tables and roles.
2. Each entity becomes a concrete row: an existing seed row (chosen from a few candidates per
   table) reused as it is, or copied under a new key, with field overrides. The rows go into the
   event's own database through the schema and the validators; their complaints are shown to the
   model for repair, a bounded number of times. An event that stays invalid is reported as such.
3. Symbols in the scenario are replaced by the real keys.

The event's database is the whole seed (background rows, so lookups can go wrong) plus its rows.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from intellagent.environment import Database, Row, RowError
from intellagent.environment.validators import validate_database
from intellagent.model import StrictModel
from intellagent.steps import Generator, Output
from intellagent_plugins.intellagent.artefacts import Event, EventPolicy, EventSpec, PolicyGraph, Symbol

CANDIDATES = 6


class Config(StrictModel):
    repairs: int = Field(default=2, ge=0, description="Rounds of validator feedback per event.")
    max_entities: int = Field(default=5, ge=1)


def _draft_model(spec: EventSpec, tables: list[str], max_entities: int) -> type[BaseModel]:
    fields: dict[str, Any] = {
        "scenario": (str, Field(description="What the user wants and how they behave, in the "
                                            "second person; refer to entities by symbol.")),
        "user_knowledge": (str, Field(description="Facts the user knows and may state.")),
        "expected": (list[str], Field(min_length=len(spec.policies), max_length=len(spec.policies),
                                      description="Expected agent behaviour, one per policy, in "
                                                  "the order listed.")),
    }
    if tables:
        entity = create_model("EntityDraft", symbol=(str, Field(description="A short label such as U1 or O2.")),
                              table=(Literal[tuple(tables)], ...), role=(str, ...))
        fields["entities"] = (list[entity], Field(min_length=1, max_length=max_entities))
    return create_model("ScenarioDraft", **fields)


def _rows_model(count: int) -> type[BaseModel]:
    row = create_model(
        "RowDraft",
        template=(int, Field(ge=0, le=CANDIDATES - 1, description="Index of the candidate row "
                                                                  "of its table to start from.")),
        new=(bool, Field(description="True: a new row copied from the template under a new key; "
                                     "false: use the existing row.")),
        overrides=(dict[str, Any], Field(default_factory=dict, description="Fields to change; "
                                         "JSON values; symbols (U1) stand for their rows' keys.")))
    return create_model("RowsDraft", rows=(list[row], Field(min_length=count, max_length=count)))


class SymbolicEvents(Generator):
    """A scenario, expected behaviour and database rows for one sampled policy set."""

    name = "symbolic-events"
    Config = Config
    inputs = {"graph": PolicyGraph, "spec": EventSpec}
    output = Event
    roles = {"generator": "writes scenarios, expected behaviour and database rows"}

    async def run(self, ctx, graph: PolicyGraph, spec: EventSpec) -> Output[Event]:
        event = await self._make(ctx, graph, spec)
        return Output(value=event, status=event.status, halt=event.status != "ok",
                      note=event.error or "")

    async def _make(self, ctx, graph: PolicyGraph, spec: EventSpec) -> Event:
        env = ctx.env
        schema = env.db_schema
        tables = list(schema.tables) if schema else []
        policies = [graph.policy(p) for p in spec.policies]
        listing = "\n".join(f"{i + 1}. [{p.category}, challenge {p.challenge}] {p.text}"
                            for i, p in enumerate(policies))
        messages = [
            {"role": "system", "content": "You design test scenarios for a conversational agent. "
                                          "Each scenario must put every listed policy to the test."},
            {"role": "user", "content": f"The agent's task: {graph.task}\n\nAgent prompt:\n"
             f"{env.prompt}\n\nPolicies to test together:\n{listing}\n\n"
             + (f"Database tables: {', '.join(tables)}. Name the entities the scenario involves "
                "(users, orders, …) as symbols such as U1, O1." if tables else "")}]
        draft = await ctx.llm.structured(messages, _draft_model(spec, tables, self.config.max_entities),
                                         role="generator")
        if not draft.ok:
            return Event(id=spec.id, spec=spec, status="infra-error", error=draft.error)
        d = draft.value
        event = Event(id=spec.id, spec=spec, scenario=d.scenario, user_knowledge=d.user_knowledge,
                      policies=[EventPolicy(id=p.id, text=p.text, category=p.category,
                                            challenge=p.challenge, expected=text)
                                for p, text in zip(policies, d.expected)])
        if not tables:
            return event
        return await self._materialize(ctx, event, d.entities, messages)

    async def _materialize(self, ctx, event: Event, entities: list[Any], messages: list[dict]) -> Event:
        env = ctx.env
        seed_db = env.seed_database()
        rng = ctx.rng("candidates", event.id)
        candidates = {}
        for table in sorted({e.table for e in entities}):  # sorted: set order varies per process
            keys = seed_db.keys(table)
            candidates[table] = rng.sample(keys, min(CANDIDATES, len(keys))) if keys else []
        shown = {t: [{"index": i, "key": k, "record": seed_db.get(t, k)} for i, k in enumerate(keys)]
                 for t, keys in candidates.items()}
        listing = "\n".join(f"{e.symbol} ({e.table}): {e.role}" for e in entities)
        ask = messages + [{"role": "user", "content":
            f"Entities:\n{listing}\n\nFor each entity, in order, pick a template row of its table "
            "(by index), say whether it is a new row copied from it, and give the fields to "
            f"change.\nCandidate rows:\n{json.dumps(shown, default=str)[:12000]}"}]
        model = _rows_model(len(entities))
        errors: list[str] = []
        for attempt in range(self.config.repairs + 1):
            if errors:
                ask = ask + [{"role": "user", "content": "These rows were rejected:\n- "
                              + "\n- ".join(errors[:10]) + "\nFix them."}]
            outcome = await ctx.llm.structured(ask, model, role="generator")
            if not outcome.ok:
                return event.model_copy(update={"status": "infra-error", "error": outcome.error})
            db = seed_db.copy()
            symbols, rows, errors = self._apply(db, env.validators, entities, outcome.value.rows,
                                                candidates, event.id)
            if not errors:
                scenario = event.scenario
                knowledge = event.user_knowledge
                for s in symbols:
                    scenario = re.sub(rf"\b{re.escape(s.symbol)}\b", s.key, scenario)
                    knowledge = re.sub(rf"\b{re.escape(s.symbol)}\b", s.key, knowledge)
                facts = {s.symbol: db.get(s.table, s.key) for s in symbols}
                knowledge += "\n\nRecords involved:\n" + json.dumps(facts, default=str)[:4000]
                return event.model_copy(update={
                    "scenario": scenario, "user_knowledge": knowledge, "symbols": symbols,
                    "rows": rows, "initial_hash": db.hash(), "repairs": attempt})
        return event.model_copy(update={"status": "invalid", "repairs": self.config.repairs,
                                        "error": "rows still invalid after repairs: " + "; ".join(errors[:5])})

    def _apply(self, db: Database, validators: list[Any], entities: list[Any], drafts: list[Any],
               candidates: dict[str, list[str]], event_id: str) -> tuple[list[Symbol], list[Row], list[str]]:
        schema = db.schema
        symbols: list[Symbol] = []
        keys: dict[str, str] = {}
        errors: list[str] = []
        planned = []
        for entity, draft in zip(entities, drafts):
            table = schema.tables[entity.table]
            pool = candidates.get(entity.table) or []
            if not pool:
                errors.append(f"{entity.symbol}: table {entity.table} has no rows to start from")
                continue
            template_key = pool[min(draft.template, len(pool) - 1)]
            slug = re.sub(r"[^a-z0-9]+", "", entity.symbol.lower())[:8] or "x"
            key = f"{template_key}-{event_id.lower()}-{slug}" if draft.new else template_key
            keys[entity.symbol] = key
            planned.append((entity, draft, table, template_key, key))
        for entity, draft, table, template_key, key in planned:
            record = copy.deepcopy(db.get(entity.table, template_key))
            for field, value in draft.overrides.items():
                if field not in table.columns:
                    errors.append(f"{entity.symbol}: {entity.table} has no column '{field}'")
                    continue
                if field == table.primary_key:
                    continue
                record[field] = keys.get(value, value) if isinstance(value, str) else value
            if table.key_in_record:
                record[table.primary_key] = key
            try:
                with db.transaction():
                    db.put(entity.table, key, record)
            except RowError as exc:
                errors.append(f"{entity.symbol}: {exc}")
                continue
            symbols.append(Symbol(symbol=entity.symbol, table=entity.table, key=key,
                                  role=entity.role, new=bool(draft.new)))
        if errors:
            return symbols, [], errors
        errors = validate_database(db, validators, rows=sorted({(s.table, s.key) for s in symbols}))
        rows = [Row(table=s.table, key=s.key, record=db.get(s.table, s.key)) for s in symbols]
        return symbols, rows, errors

