"""``api-graph``: the API dependency graph of an environment, and the rules its samplers use.

Tools are nodes, read or write (``action: true``). An edge A → B says B's input can come from
A's output. It is found from the data, not from names: each tool is called on a copy of the seed
database with arguments taken from one seed record (tried on several records until a call
succeeds), and A → B via ``p`` when A's output holds an identifier that is a value of a field
named ``p`` somewhere in the data. The policy prunes edges: nothing follows a terminal tool, and
a write → write edge is dropped when doing B right after A on the same record breaks one of the
environment's rule checks (cancel, then return the same order).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Iterator

from intellagent.bounds import MAX_ITEMS
from intellagent.environment import run_actions, run_checks
from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.steps import Extractor
from pydantic import Field

from intellagent_plugins.apigen_mt.artefacts import ApiEdge, ApiGraph, Rule, ToolNode

MAX_VALUES = 5000


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(field name, scalar value) pairs of a JSON value; dict keys count as values too (ids of
    payment methods are keys)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield "", k
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, path)
    elif value is not None and not isinstance(value, bool):
        yield path, value


def identifier(value: Any) -> bool:
    """A value that names a record (an id, a code), not a common word or a number."""
    text = str(value)
    return len(text) >= 3 and not isinstance(value, float) and (
        any(c.isdigit() for c in text) and any(not c.isdigit() for c in text) or text.isupper()
        or (isinstance(value, str) and text.isdigit() and len(text) >= 6))


def records(db, schema) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every seed record (its table's primary key filled in)."""
    for name, table in schema.tables.items():
        for key, record in db.items(name):
            yield name, {table.primary_key: key, **record}


def field_values(db, schema) -> dict[str, set[str]]:
    values: dict[str, set[str]] = defaultdict(set)
    for _, record in records(db, schema):
        for name, value in _walk(record):
            if name and len(values[name]) < MAX_VALUES:
                values[name].add(str(value))
    return values


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """Every field name in a record (nested objects and lists of objects too), first value."""
    out: dict[str, Any] = {}
    queue = [record]
    while queue:
        item = queue.pop(0)
        for k, v in item.items():
            out.setdefault(k, v)
            if isinstance(v, dict):
                queue.append(v)
            elif isinstance(v, list):
                queue.extend(x for x in v if isinstance(x, dict))
    return out


def probe_arguments(spec, record: dict[str, Any]) -> dict[str, Any] | None:
    """Arguments for ``spec`` from one record, or None when the record lacks a required one."""
    flat = _flat(record)
    props = spec.parameters.get("properties", {})
    args: dict[str, Any] = {}
    for name in spec.parameters.get("required", []):
        schema = props.get(name, {})
        if "enum" in schema:
            args[name] = schema["enum"][0]
        elif name in flat and (not isinstance(flat[name], (dict, list))
                               or schema.get("type") in ("array", "object")):
            args[name] = flat[name]
        elif schema.get("type") == "array" and name.endswith("s") and name[:-1] in flat:
            args[name] = [flat[name[:-1]]]  # item_ids from an item's item_id
        else:
            return None
    return args


class GraphConfig(StrictModel):
    probes: int = Field(default=30, ge=1, le=MAX_ITEMS,
                        description="Seed records tried per tool to find a call "
                                                      "that succeeds.")
    forbid: list[tuple[str, str]] = Field(default_factory=list, description="Pairs (A, B) the "
                                          "policy does not allow in this order, besides those the "
                                          "rule checks find.")


def policy_sections(prompt: str) -> list[Rule]:
    """The policy text split at its Markdown headings: one rule per section."""
    parts = re.split(r"(?m)^(#{2,4} .+)$", prompt)
    rules = []
    for i in range(1, len(parts) - 1, 2):
        title = parts[i].lstrip("#").strip()
        body = parts[i + 1].strip()
        if body:
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
            rules.append(Rule(id=f"section:{slug}", text=f"{title}\n{body}"))
    return rules


class ApiGraphExtractor(Extractor):
    """The API dependency graph from the environment's tools, data and rule checks."""

    name = "api-graph"
    Config = GraphConfig
    output = ApiGraph

    def run(self, ctx) -> ApiGraph:
        env = ctx.env
        if env.db_schema is None or not any(s.action for s in env.tool_specs):
            raise ConfigError(f"APIGen-MT needs an environment with a database and write tools "
                              f"(action: true); '{env.name}' has "
                              + ("no database" if env.db_schema is None else "no write tool"),
                              item="step graph")
        unknown = [name for pair in self.config.forbid for name in pair if name not in env.tools]
        if unknown:
            raise ConfigError(f"'{unknown[0]}' is not a tool of '{env.name}' (tools: "
                              f"{', '.join(sorted(env.tools))})", item=f"steps.{ctx.step}.with.forbid")
        nodes = [ToolNode(name=s.name, writes=s.action, terminal=s.terminal,
                          inputs=list(s.parameters.get("properties", {}))) for s in env.tool_specs
                 if s.name in env.tools]
        rules = [Rule(id=c.id, text=c.rule, check=True) for c in env.checks] + policy_sections(env.prompt)
        seed = env.seed_database()
        values = field_values(seed, env.db_schema)
        rows = list(records(seed, env.db_schema))
        rng = ctx.rng("probe-order")
        rng.shuffle(rows)
        produced: dict[str, set[str]] = {}
        probes: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # tool → (args, record)
        for node in nodes:
            spec = env.tools[node.name].spec
            produced[node.name] = set()
            tried = 0
            for _, record in ([("", {})] if not spec.parameters.get("required") else rows):
                args = probe_arguments(spec, record)
                if args is None:
                    continue
                tried += 1
                trace = run_actions(env.tools, seed.copy(), [(node.name, args)])
                ok = not trace.actions[0].error
                if ok:
                    produced[node.name] = {str(v) for _, v in _walk(trace.actions[0].result) if identifier(v)}
                    probes[node.name] = (args, record)
                trace.close()
                if ok or tried >= self.config.probes:
                    break
        edges = []
        forbidden = {tuple(p) for p in self.config.forbid} | self._conflicts(env, nodes, probes, seed)
        for a in nodes:
            if a.terminal:
                continue
            for b in nodes:
                if a.name == b.name or (a.name, b.name) in forbidden:
                    continue
                via = [p for p in b.inputs if produced[a.name] & values.get(p, set())]
                if via:
                    edges.append(ApiEdge(a=a.name, b=b.name, via=via))
        seed.close()
        return ApiGraph(environment=env.name, tools=nodes, edges=edges, rules=rules,
                        subject=subject_table(env.db_schema))

    def _conflicts(self, env, nodes, probes, seed) -> set[tuple[str, str]]:
        """Write pairs (A, B) where B right after A, on A's record, breaks a rule check."""
        if not env.checks:
            return set()
        out = set()
        writes = [n for n in nodes if n.writes and n.name in probes]
        for a in writes:
            args_a, record = probes[a.name]
            alone = run_actions(env.tools, seed.copy(), [(a.name, args_a)])
            known = {(f.check, f.message) for f in run_checks(env.checks, alone)}
            alone.close()
            for b in writes:
                args_b = probe_arguments(env.tools[b.name].spec, {**record, **args_a})
                if args_b is None:
                    continue
                args_b.update({k: v for k, v in args_a.items() if k in args_b})
                trace = run_actions(env.tools, seed.copy(), [(a.name, args_a), (b.name, args_b)],
                                    stop_on_error=False)
                new = {(f.check, f.message) for f in run_checks(env.checks, trace)} - known
                if not trace.actions[0].error and new:
                    out.add((a.name, b.name))
                trace.close()
        return out


def subject_table(schema) -> str | None:
    """The table other tables refer to most: whom tasks are for (users)."""
    counts = Counter(c.references.split(".")[0] for t in schema.tables.values()
                     for c in t.columns.values() if c.references)
    return counts.most_common(1)[0][0] if counts else None
