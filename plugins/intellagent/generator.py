"""``symbolic-events``: a scenario per sampled policy set, then concrete rows for it.

1. The model writes the scenario for the simulated user, what the user knows, the expected agent
   behaviour per policy id, the entities involved as symbols (U1, R1, …) with their tables and
   roles and whether each is a new record, and the expected end state of the database.
2. The model picks a template row per entity (from a few candidates per table, each table within
   its own budget), the fields to change, and for a new row its key (else it gets one in the
   shape of its template's key; never derived from the event). Symbols are replaced by keys
   anywhere in a value, inside lists and nested objects too, so rows can refer to each other
   before their keys exist. A new row is a copy of its template with fresh unique values (emails)
   and empty lists of the rows the template owns; lists a schema declares (``lists:``) are kept
   in step with the foreign keys they mirror.
3. The rows go into the event's own database through the schema and the validators; their
   complaints, with the model's previous answer, go back to the model for repair, a bounded
   number of times. An event that stays invalid is reported with the reasons.

The event's database is the whole seed (background rows, so lookups can go wrong) plus its rows.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from intellagent.bounds import MAX_CHARS, MAX_ROUNDS, MAX_TURNS
from intellagent.environment import Database, Row, RowError
from intellagent.environment.links import copy_as_new, fresh_key, sync_links
from intellagent.environment.validators import validate_database
from intellagent.model import StrictModel
from intellagent.prompts import PromptsFolder
from intellagent.estimate import tokens
from intellagent.steps import Generator, ItemEstimate, Output, RoleLoad, Statuses
from intellagent_plugins.intellagent.artefacts import (Event, EventPolicy, EventSpec, Expectation,
                                                       ExpectationKind, PolicyGraph, Symbol)
from intellagent_plugins.intellagent.keyed import keyed_model
from intellagent_plugins.intellagent.prompts import Prompts

CANDIDATES = 6
KEY = re.compile(r"^[^\s]{1,64}$")
PROMPTS = ("generator.system.md", "scenario.md", "rows.md", "repair.md")


def record_tokens(env, per_table: int = 3) -> float:
    """The mean tokens of a record of the environment's seed data (a few of each table), for
    estimates; 0 without a database."""
    if not env.db_schema:
        return 0.0
    db = env.seed_database()
    try:
        sizes = [len(db.record_json(t, k) or "") for t in env.db_schema.tables for k in db.keys(t, limit=per_table)]
    finally:
        db.close()
    return sum(sizes) / len(sizes) / 4 if sizes else 0.0


class Config(StrictModel):
    repairs: int = Field(default=2, ge=0, le=MAX_ROUNDS,
                         description="Rounds of validator feedback per event.")
    max_entities: int = Field(default=5, ge=1, le=MAX_TURNS)
    candidate_chars: int = Field(default=6000, ge=500, le=MAX_CHARS,
                                 description="Budget of candidate rows shown "
                                 "per table, in characters.")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")



class ExpectationDraft(BaseModel):
    kind: ExpectationKind
    entity: str = Field(default="", description="The record's symbol (not for row-added).")
    table: str = Field(default="", description="The table (row-added).")
    field: str = Field(default="", description="Dotted path inside the record (field-equals, "
                                               "field-changes).")
    value: Any = Field(default=None, description="field-equals: the final value; row-added: an "
                                                 "object of the fields the new row must have.")


def _draft_model(policies: list[EventPolicy], tables: list[str], max_entities: int) -> type[BaseModel]:
    return keyed_model("ScenarioDraft", "ExpectedBehaviour", [p.id for p in policies], str, _draft_fields,
                       tuple(tables), max_entities, describe=_expected_text)


def _expected_text(policy_id: str) -> str:
    return f"What a correct agent does about {policy_id}."


def _draft_fields(expected: type[BaseModel], tables: tuple[str, ...], max_entities: int) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "scenario": (str, Field(description="What the user wants and how they behave, in the "
                                            "second person; refer to entities by symbol.")),
        "user_knowledge": (str, Field(description="Facts the user knows and may state.")),
        "expected": (expected, Field(description="Per policy id: the expected agent behaviour.")),
    }
    if tables:
        fields["entities"] = (list[_entity_model(tables)], Field(min_length=1, max_length=max_entities))
        fields["end_state"] = (list[ExpectationDraft], Field(default_factory=list, max_length=8))
    return fields


@functools.lru_cache(maxsize=64)
def _entity_model(tables: tuple[str, ...]) -> type[BaseModel]:
    """Made once per environment: one class, so its schema is made once too."""
    return create_model("EntityDraft",
                        symbol=(str, Field(pattern=r"^[A-Z]{1,3}[0-9]{1,2}$", description="A short "
                                           "label such as U1 or R2.")),
                        table=(Literal[tables], ...), role=(str, ...),
                        new=(bool, Field(description="A new record made for this scenario.")))


@functools.lru_cache(maxsize=64)
def _rows_model(count: int) -> type[BaseModel]:
    row = create_model(
        "RowDraft",
        template=(int, Field(ge=0, le=CANDIDATES - 1, description="Index of the candidate row "
                                                                  "of its table to start from.")),
        key=(str, Field(default="", description="A new row's key, in the table's format; empty "
                                                "for an existing row or to get one made.")),
        overrides=(dict[str, Any], Field(default_factory=dict, description="Fields to change; "
                                         "JSON values; symbols (U1) stand for their rows' keys.")))
    return create_model("RowsDraft", rows=(list[row], Field(min_length=count, max_length=count)))


def substitute(value: Any, keys: dict[str, str]) -> Any:
    """``value`` with every string (or object key) that is a symbol replaced by its key."""
    if isinstance(value, str):
        return keys.get(value, value)
    if isinstance(value, list):
        return [substitute(v, keys) for v in value]
    if isinstance(value, dict):
        return {keys.get(k, k): substitute(v, keys) for k, v in value.items()}
    return value


def _in_text(text: str, keys: dict[str, str]) -> str:
    """``text`` with each symbol (a whole word) replaced by its key, symbol after symbol (a key
    may name a later symbol)."""
    for symbol, key in keys.items():
        if symbol in text:  # a whole-word match is first a match: most symbols are not in a given text
            text = _symbol_pattern(symbol).sub(lambda _m, key=key: key, text)
    return text


@functools.lru_cache(maxsize=256)
def _symbol_pattern(symbol: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(symbol)}\b")


class SymbolicEvents(Generator):
    """A scenario, expected behaviour and end state, and database rows for one sampled policy set."""

    name = "symbolic-events"
    statuses = Statuses(passed=["ok"], other=["invalid"])
    Config = Config
    inputs = {"graph": PolicyGraph, "spec": EventSpec}
    output = Event
    roles = {"generator": "writes scenarios, expected behaviour and database rows"}

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, PROMPTS)

    def fingerprint(self) -> dict[str, str]:
        return self.prompts.fingerprint()

    def estimate(self, env) -> ItemEstimate:
        """One call for the scenario (the agent's prompt, about three policies, the tables with
        example keys) and, with a database, one for the rows (the candidate rows of three
        tables), plus a repair round for one event in ten."""
        schema = env.db_schema
        tables = list(schema.tables) if schema else []
        seed_db = env.seed_database() if schema else None
        try:
            examples = {t: seed_db.keys(t, limit=3) for t in tables} if seed_db else {}
            rows = [[seed_db.record_json(t, k) for k in seed_db.keys(t, limit=CANDIDATES)] for t in tables] \
                if seed_db else []
        finally:
            if seed_db is not None:
                seed_db.close()
        policies = 3
        draft = tokens(self.prompts.source("generator.system.md"), self.prompts.source("scenario.md"),
                       env.prompt or "", examples) + policies * 40
        written = 250 + 60 * policies + 30 * min(3, self.config.max_entities)
        if not tables:
            return ItemEstimate(roles={"generator": RoleLoad(calls=1, prompt_tokens=draft,
                                                              completion_tokens=written)}, sequential=1)
        shown = sum(min(self.config.candidate_chars, sum(len(x or "") for x in r)) for r in rows) / max(1, len(rows)) / 4
        entities = min(3, self.config.max_entities, len(tables))
        ask = draft + written + tokens(self.prompts.source("rows.md")) + entities * shown
        calls = 2 + 0.1 * min(1, self.config.repairs)
        return ItemEstimate(roles={"generator": RoleLoad(
            calls=calls, prompt_tokens=(draft + (calls - 1) * ask) / calls,
            completion_tokens=(written + (calls - 1) * entities * 120) / calls)}, sequential=calls)

    async def run(self, ctx, graph: PolicyGraph, spec: EventSpec) -> Output[Event]:
        event = await self._make(ctx, graph, spec)
        return Output(value=event, status=event.status, halt=event.status != "ok",
                      note=event.error or "")

    async def _make(self, ctx, graph: PolicyGraph, spec: EventSpec) -> Event:
        env = ctx.env
        schema = env.db_schema
        tables = list(schema.tables) if schema else []
        policies = [EventPolicy(id=p.id, text=p.text, category=p.category, challenge=p.challenge)
                    for p in map(graph.policy, spec.policies)]
        seed = env.seed_view() if schema else None  # read here; a copy is made for the rows only
        examples = {t: seed.keys(t, limit=3) for t in tables} if seed else {}
        messages = [
            {"role": "system", "content": self.prompts.render("generator.system.md")},
            {"role": "user", "content": self.prompts.render(
                "scenario.md", task=graph.task, agent_prompt=env.prompt, policies=policies,
                complexity=spec.complexity, tables=tables, key_examples=examples)}]
        draft = await ctx.llm.structured(messages, _draft_model(policies, tables, self.config.max_entities),
                                         role="generator")
        if not draft.ok:
            return Event(id=spec.id, spec=spec, status=draft.status.value, error=draft.error)
        d = draft.value
        event = Event(id=spec.id, spec=spec, brief=d.scenario, user_knowledge=d.user_knowledge,
                      policies=[p.model_copy(update={"expected": d.expected[p.id]}) for p in policies])
        if not tables:
            return event
        # an entity named twice is one entity
        entities = list({e.symbol: e for e in d.entities}.values())
        return await self._materialize(ctx, seed, event, entities, d.end_state, messages)

    async def _materialize(self, ctx, seed: Database, event: Event, entities: list[Any],
                           end_state: list[ExpectationDraft], messages: list[dict]) -> Event:
        env = ctx.env
        rng = ctx.rng("rows")
        candidates: dict[str, list[str]] = {}
        for table in sorted({e.table for e in entities}):  # sorted: set order varies per process
            keys = seed.keys(table)
            candidates[table] = rng.sample(keys, min(CANDIDATES, len(keys))) if keys else []
        shown, omitted = self._candidates(seed, candidates)
        ask = messages + [{"role": "user", "content": self.prompts.render(
            "rows.md", entities=entities, candidates=shown, omitted=omitted)}]
        model = _rows_model(len(entities))
        errors: list[str] = []
        for attempt in range(self.config.repairs + 1):
            outcome = await ctx.llm.structured(ask, model, role="generator")
            if not outcome.ok:
                return event.model_copy(update={"status": outcome.status.value, "error": outcome.error})
            with env.lent_database() as db:  # the seed as it was, each attempt
                symbols, rows, errors = self._apply(db, env.validators, entities, outcome.value.rows,
                                                    candidates, rng)
                if not errors:
                    by_symbol = {s.symbol: s.key for s in symbols}
                    # json.dumps({symbol: record}, default=str, ensure_ascii=False), each record's
                    # text as the database keeps it for a row it has shown before (a flight's is
                    # 5 KB, and was among the candidates); this event's own rows are not kept
                    facts = ", ".join(f"{json.dumps(s.symbol, ensure_ascii=False)}: "
                                      f"{db.record_json(s.table, s.key, keep=False)}" for s in symbols)
                    knowledge = _in_text(event.user_knowledge, by_symbol) + "\n\nRecords involved:\n{" + facts + "}"
                    return event.model_copy(update={
                        "brief": _in_text(event.brief, by_symbol), "user_knowledge": knowledge,
                        "symbols": symbols, "rows": rows, "repairs": attempt,
                        "end_state": self._end_state(end_state, symbols, db)})
            ask = ask + [{"role": "assistant", "content": outcome.value.model_dump_json()},
                         {"role": "user", "content": self.prompts.render("repair.md", errors=errors[:10])}]
        return event.model_copy(update={"status": "invalid", "repairs": self.config.repairs,
                                        "error": "rows still invalid after repairs: " + "; ".join(errors[:5])})

    def _candidates(self, db: Database, candidates: dict[str, list[str]]) -> tuple[dict, dict]:
        """Candidate rows per table, each table within its own character budget (whole records
        only, at least one)."""
        shown: dict[str, list[dict]] = {}
        omitted: dict[str, int] = {}
        for table, keys in candidates.items():
            shown[table], used = [], 0
            for i, key in enumerate(keys):
                record = db.record_json(table, key)
                if shown[table] and used + len(record) > self.config.candidate_chars:
                    break
                shown[table].append({"index": i, "key": key, "record": record})
                used += len(record)
            omitted[table] = len(keys) - len(shown[table])
        return shown, omitted

    def _apply(self, db: Database, validators: list[Any], entities: list[Any], drafts: list[Any],
               candidates: dict[str, list[str]], rng: Any) -> tuple[list[Symbol], list[Row], list[str]]:
        schema = db.schema
        errors: list[str] = []
        keys: dict[str, str] = {}
        planned = []
        for entity, draft in zip(entities, drafts):
            pool = candidates.get(entity.table) or []
            if not pool:
                errors.append(f"{entity.symbol}: table {entity.table} has no rows to start from")
                continue
            template = pool[min(draft.template, len(pool) - 1)]
            if not entity.new:
                keys[entity.symbol] = template
            elif KEY.match(draft.key) and draft.key not in keys.values() and not db.has(entity.table, draft.key):
                keys[entity.symbol] = draft.key
            else:
                keys[entity.symbol] = fresh_key(db, entity.table, template, rng, reserved=set(keys.values()))
            planned.append((entity, draft, template))
        symbols: list[Symbol] = []
        for entity, draft, template in planned:
            table = schema.tables[entity.table]
            key = keys[entity.symbol]
            record = copy_as_new(db, entity.table, template, key, rng) if entity.new else db.get(entity.table, template)
            for field, value in substitute(draft.overrides, keys).items():
                if field not in table.columns:
                    errors.append(f"{entity.symbol}: {entity.table} has no column '{field}'")
                elif field != table.primary_key:
                    record[field] = value
            try:  # (one statement: a row refused writes nothing, no savepoint needed)
                db.put(entity.table, key, record)
            except RowError as exc:
                errors.append(f"{entity.symbol}: {exc}")
                continue
            symbols.append(Symbol(symbol=entity.symbol, table=entity.table, key=key,
                                  role=entity.role, new=bool(entity.new)))
        if errors:
            return symbols, [], errors
        touched = {(s.table, s.key) for s in symbols}
        try:
            with db.transaction():
                touched |= set(sync_links(db, sorted(touched)))
        except RowError as exc:
            return symbols, [], [str(exc)]
        records = {(t, k): db.get(t, k) for t, k in sorted(touched)}
        errors = validate_database(db, validators, rows=[(t, k, r) for (t, k), r in records.items()])
        order = {t: i for i, t in enumerate(schema.load_order())}
        rows = [Row(table=t, key=k, record=records[t, k])
                for t, k in sorted(touched, key=lambda r: (order[r[0]], r[1]))]
        return symbols, rows, errors

    @staticmethod
    def _end_state(drafts: list[ExpectationDraft], symbols: list[Symbol], db: Database) -> list[Expectation]:
        """The expected end state with symbols resolved; expectations naming no known record,
        table or column are left out."""
        by_symbol = {s.symbol: s for s in symbols}
        keys = {s.symbol: s.key for s in symbols}
        out = []
        for d in drafts:
            if d.kind == "row-added":
                table = db.schema.tables.get(d.table)
                if table and isinstance(d.value, dict) and set(d.value) <= set(table.columns):
                    out.append(Expectation(kind=d.kind, table=d.table, value=substitute(d.value, keys)))
                continue
            s = by_symbol.get(d.entity)
            if s is None:
                continue
            columns = db.schema.tables[s.table].columns
            if d.kind.startswith("field-") and d.field.split(".")[0] not in columns:
                continue
            out.append(Expectation(kind=d.kind, entity=s.symbol, table=s.table, key=s.key,
                                   field=d.field if d.kind.startswith("field-") else "",
                                   value=substitute(d.value, keys) if d.kind == "field-equals" else None))
        return out
