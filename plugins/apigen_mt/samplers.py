"""``blueprint-contexts``: what each blueprint is generated from. Five samplers feed the
generator's prompt, each used in an iteration with its own frequency (for diversity):

- API sampler: a walk on the API graph that starts at a write tool (the least used so far
  first) and continues to other write tools the graph allows after it, with the read tools that
  feed each write in front;
- policy sampler: the domain's rules closest to the sampled tools, plus a random one;
- domain-data sampler: a user record and the records linked to it (its orders, the products
  they name), then other records, within a character budget;
- persona sampler: a short user persona (a shipped set, or your own file);
- example sampler: few-shot blueprints (τ-bench-style task JSON; a shipped set per built-in
  domain, or your own file).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from intellagent.bounds import MAX_CHARS, MAX_ITEMS, MAX_TURNS
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.paths import path_option
from intellagent.steps import Sampler
from intellagent.yamlio import read_json, read_yaml

from intellagent_plugins.apigen_mt.artefacts import ApiGraph, Blueprint, BlueprintContext, Call
from intellagent_plugins.apigen_mt.graph import _walk, identifier, records

HERE = Path(__file__).parent
PersonasFile = path_option("file", "personas file")
ExamplesFile = path_option("file", "examples file")


class Frequencies(StrictModel):
    """How often each sampler feeds an iteration (0 never, 1 always)."""

    api: float = Field(default=1.0, ge=0, le=1)
    policy: float = Field(default=0.8, ge=0, le=1)
    data: float = Field(default=1.0, ge=0, le=1)
    persona: float = Field(default=0.8, ge=0, le=1)
    examples: float = Field(default=0.6, ge=0, le=1)


class ContextConfig(StrictModel):
    blueprints: int = Field(default=20, ge=1, le=MAX_ITEMS,
                            description="Blueprints to generate (one context each).")
    max_writes: int = Field(default=2, ge=1, le=MAX_TURNS,
                            description="Write tools per API walk, at most.")
    frequencies: Frequencies = Field(default_factory=Frequencies)
    rules: int = Field(default=4, ge=0, le=MAX_TURNS, description="Rules the policy sampler picks.")
    data_budget: int = Field(default=6000, ge=500, le=MAX_CHARS, description="Characters of records "
                             "the domain-data sampler gives.")
    personas: PersonasFile = Field(default=None, description="YAML or JSON list of personas "
                                   "(default: the shipped set).")
    examples: ExamplesFile = Field(default=None, description="τ-bench-style task JSON of example "
                                   "blueprints (default: the shipped set for the environment).")
    examples_per_context: int = Field(default=2, ge=0, le=MAX_TURNS)
    user_pool: int | None = Field(default=None, ge=1, le=MAX_ITEMS,
                                  description="Draw the users from a pool of "
                                  "this many (seeded), so that several blueprints share a user "
                                  "and can be recombined; all users when unset.")

    @field_validator("personas")
    @classmethod
    def _personas(cls, value: str | None) -> str | None:
        """A bad persona file is refused with the pipeline, before any step runs."""
        if value is not None:
            try:
                load_personas(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("examples")
    @classmethod
    def _examples(cls, value: str | None) -> str | None:
        """A bad example file is refused with the pipeline, before any step runs."""
        if value is not None:
            try:
                load_examples(value, "")
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value


def load_personas(path: str | None) -> list[str]:
    source = Path(path) if path else HERE / "personas.yaml"
    data = read_yaml(source) if source.suffix in (".yaml", ".yml") else read_json(source)
    if not isinstance(data, list) or not data or not all(isinstance(p, str) and p.strip() for p in data):
        raise ConfigError("personas must be a non-empty list of strings", file=source)
    return [str(p) for p in data]


class ExampleAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict, validation_alias=AliasChoices("kwargs", "arguments"))


class ExampleTask(BaseModel):
    """One entry of an example file: a τ-bench task (other keys, such as ``annotator``, are
    ignored)."""

    model_config = ConfigDict(extra="ignore")

    instruction: str = Field(min_length=1)
    actions: list[ExampleAction] = Field(min_length=1)
    outputs: list[str] = Field(default_factory=list)
    user_id: str = ""
    thought: str = ""


def _entry_error(exc: ValidationError, i: int, n: int, entry: Any) -> str:
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    if err["type"] == "missing":
        what = f"missing required key '{err['loc'][-1]}'"
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"][:-1]).lstrip(".")
    elif err["type"] in ("model_type", "dict_type"):
        what = "expected a JSON object"
    else:
        what = err["msg"]
    user = entry.get("user_id") if isinstance(entry, dict) else None
    return (f"entry {i + 1} of {n}" + (f" (user {user})" if user else "") + ": "
            + (f"{loc}: " if loc else "") + what)


def load_examples(path: str | None, environment: str) -> list[Blueprint]:
    """Example blueprints from a τ-bench-style task file (user_id, instruction, actions with
    kwargs, outputs); a bad entry is one line naming the file and the entry."""
    source = Path(path) if path else HERE / "examples" / f"{environment}.json"
    if not source.is_file():
        return []
    try:
        tasks = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", file=source, line=exc.lineno) from None
    if not isinstance(tasks, list):
        raise ConfigError("expected a JSON list of tasks", file=source)
    out = []
    for i, entry in enumerate(tasks):
        try:
            t = ExampleTask.model_validate(entry)
        except ValidationError as exc:
            raise ConfigError(_entry_error(exc, i, len(tasks), entry), file=source) from None
        out.append(Blueprint(thought=t.thought, user_id=t.user_id, instruction=t.instruction,
                             outputs=t.outputs, actions=[Call(name=a.name, arguments=a.kwargs) for a in t.actions]))
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z]+", text.lower()) if len(w) > 3}


class BlueprintContexts(Sampler):
    """One generation context per blueprint, from the API graph and the domain's data."""

    name = "blueprint-contexts"
    Config = ContextConfig
    inputs = {"graph": ApiGraph}
    output = list[BlueprintContext]

    def fingerprint(self) -> Any:
        """The persona and example files' text (the built-in ones, or the user's)."""
        c = self.config
        files = [Path(c.personas) if c.personas else HERE / "personas.yaml"]
        files += [Path(c.examples)] if c.examples else sorted((HERE / "examples").glob("*.json"))
        return {p.name: p.read_text(encoding="utf-8", errors="surrogateescape") for p in files}

    def run(self, ctx, graph: ApiGraph) -> list[BlueprintContext]:
        c = self.config
        personas = load_personas(c.personas)
        examples = load_examples(c.examples, ctx.env.name)
        db = ctx.env.seed_database() if ctx.env.db_schema is not None else None
        subjects = sorted(db.keys(graph.subject)) if db is not None and graph.subject else []
        if c.user_pool and len(subjects) > c.user_pool:
            subjects = sorted(ctx.seeded("user-pool").sample(subjects, c.user_pool))
        rows = [(t, str(r[db.schema.tables[t].primary_key]), r, len(json.dumps(r, default=str)))
                for t, r in records(db, ctx.env.db_schema)] if db is not None else []
        uses: Counter[str] = Counter()
        out = []
        for i in range(c.blueprints):
            rng = ctx.seeded("context", i)
            on = {name: rng.random() < getattr(c.frequencies, name) for name in Frequencies.model_fields}
            walk, writes = self._walk(graph, rng, uses) if on["api"] else ([], [])
            uses.update(writes)
            user = rng.choice(subjects) if subjects else ""
            data = self._data(ctx.env, db, graph.subject, user, rng, rows) if on["data"] and user else {}
            out.append(BlueprintContext(
                id=f"B{i:03d}", user_id=user, walk=walk, write_tools=writes,
                rules=self._rules(graph, walk, rng) if on["policy"] else [],
                data=data, persona=rng.choice(personas) if on["persona"] else "",
                examples=rng.sample(examples, min(c.examples_per_context, len(examples)))
                if on["examples"] else [], samplers=on))
        if db is not None:
            db.close()
        return out

    def _walk(self, graph: ApiGraph, rng, uses: Counter) -> tuple[list[str], list[str]]:
        """Write tools (the least used first, then ones the graph allows after it within two
        hops) with a read tool feeding each in front."""
        g = graph.to_networkx()
        writes = [t.name for t in graph.tools if t.writes and not t.terminal]
        if not writes:
            return [], []
        low = min(uses[w] for w in writes)
        chosen = [rng.choice(sorted(w for w in writes if uses[w] == low))]
        target = rng.randint(1, self.config.max_writes)
        while len(chosen) < target:
            last = chosen[-1]
            near = {n for n in g.successors(last)} | {m for n in g.successors(last) for m in g.successors(n)}
            options = sorted(n for n in near if n in writes and n not in chosen)
            if not options:
                break
            chosen.append(rng.choice(options))
        walk: list[str] = []
        reads = {t.name for t in graph.tools if not t.writes}
        for w in chosen:
            feeders = sorted(p for p in g.predecessors(w) if p in reads)
            if feeders:
                feeder = rng.choice(feeders)
                first = sorted(p for p in g.predecessors(feeder) if p in reads and p != feeder)
                walk += ([rng.choice(first)] if first and rng.random() < 0.5 else []) + [feeder]
            walk.append(w)
        return walk, chosen

    def _rules(self, graph: ApiGraph, walk: list[str], rng) -> list:
        words = set().union(*(_words(n.replace("_", " ")) for n in walk)) if walk else set()
        scored = sorted(graph.rules, key=lambda r: (-len(words & _words(r.text)), r.id))
        top = [r for r in scored if words & _words(r.text)][:max(0, self.config.rules - 1)]
        rest = [r for r in graph.rules if r not in top]
        if rest and self.config.rules:
            top.append(rng.choice(rest))
        return top

    def _data(self, env, db, subject: str, user: str, rng, rows: list) -> dict[str, dict[str, Any]]:
        """The user's record, the records that refer to it, the records they name, then others
        at random, until the budget is spent. ``rows`` is every (table, key, record, size)."""
        budget = self.config.data_budget
        schema = env.db_schema
        picked: dict[str, dict[str, Any]] = {}
        used = 0

        def add(table: str, key: str, record: dict[str, Any], size: int) -> bool:
            nonlocal used
            if used + size > budget and used:
                return False
            picked.setdefault(table, {})[key] = record
            used += size
            return True

        linked = {(t, col) for t, table in schema.tables.items() for col, c in table.columns.items()
                  if c.references and c.references.split(".")[0] == subject}
        mine = [r for r in rows if (r[0] == subject and r[1] == user)
                or any(r[0] == t and r[2].get(col) == user for t, col in linked)]
        for table, key, record, size in mine:
            add(table, key, record, size)
        named = {str(v) for recs in picked.values() for rec in recs.values() for _, v in _walk(rec)
                 if identifier(v)}
        others = [r for r in rows if r[0] not in picked]
        first = [r for r in others if r[1] in named]
        order = list(range(len(others)))
        rng.shuffle(order)
        for table, key, record, size in first + [others[i] for i in order if others[i][1] not in named]:
            if not add(table, key, record, size) and used >= budget * 0.95:
                break
        return picked
