"""The output cap of a structured call, sized from its response model's JSON Schema: room for
the largest answer the schema plausibly allows, so a model that never stops (a small local
model repeating itself) is cut instead of generating until the request times out."""

from __future__ import annotations

from typing import Any

FLOOR = 256
CEILING = 4096
"""Tokens. Most models accept 4,096 output tokens; a role needing more sets ``max_tokens``."""
TEXT = 150  # tokens for a string with no maxLength (a paragraph)
ITEMS = 12  # items assumed for an array with no maxItems
ENTRIES = 8  # entries assumed for an object of free-form keys
DEPTH = 6


def output_cap(schema: dict[str, Any] | None) -> int:
    """Tokens for an answer to ``schema``: twice the estimate of its largest plausible
    instance (keys, quotes and values at about three characters a token), within
    [FLOOR, CEILING]."""
    if not schema:
        return CEILING
    known = _CAPS.get(id(schema))
    if known is not None and known[0] is schema:  # a response model's schema is one dict per class
        return known[1]
    estimate = _tokens(schema, schema.get("$defs") or schema.get("definitions") or {}, 0)
    cap = max(FLOOR, min(CEILING, 2 * estimate + 32))
    if len(_CAPS) >= 128:
        _CAPS.clear()
    _CAPS[id(schema)] = (schema, cap)  # the schema held: its id is not reused while it is here
    return cap


_CAPS: dict[int, tuple[dict[str, Any], int]] = {}


def _tokens(node: Any, defs: dict[str, Any], depth: int) -> int:
    if not isinstance(node, dict) or depth > DEPTH:
        return TEXT // 2
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _tokens(defs.get(ref.rsplit("/", 1)[-1], {}), defs, depth + 1)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            return max(_tokens(alt, defs, depth + 1) for alt in node[key])
    if isinstance(node.get("allOf"), list) and node["allOf"]:
        return sum(_tokens(part, defs, depth + 1) for part in node["allOf"])
    if "enum" in node or "const" in node:
        values = node.get("enum") or [node.get("const")]
        return max(len(str(v)) for v in values) // 3 + 2
    kind = node.get("type")
    if isinstance(kind, list):
        return max(_tokens({**node, "type": k}, defs, depth + 1) for k in kind)
    if kind == "string":
        limit = node.get("maxLength")
        return (limit // 3 + 2) if isinstance(limit, int) else (12 if "pattern" in node else TEXT)
    if kind in ("integer", "number"):
        return 6
    if kind in ("boolean", "null"):
        return 2
    if kind == "array":
        count = node.get("maxItems")
        count = min(count, 64) if isinstance(count, int) else ITEMS
        return 2 + count * (_tokens(node.get("items", {}), defs, depth + 1) + 1)
    properties = node.get("properties")
    if kind == "object" or properties is not None:
        total = 2
        for name, value in (properties or {}).items():
            total += len(name) // 3 + 3 + _tokens(value, defs, depth + 1)
        extra = node.get("additionalProperties")
        if not properties and extra not in (False, None):
            total += ENTRIES * (6 + _tokens(extra if isinstance(extra, dict) else {}, defs, depth + 1))
        return total
    return TEXT // 2  # any JSON value
