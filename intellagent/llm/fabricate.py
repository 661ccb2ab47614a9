"""Deterministic fabrication of values that satisfy a JSON Schema (used by ``mock/schema`` and by
the local test server): enums, nested objects, arrays, numeric and length bounds, ``$ref``."""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from typing import Any

try:  # the standard library's regex parser (``re._parser`` since 3.11)
    from re import _parser as _sre
except ImportError:  # pragma: no cover
    import sre_parse as _sre  # type: ignore[no-redef]

_CATEGORIES = {
    "CATEGORY_DIGIT": "0123456789", "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyz0123456789_",
    "CATEGORY_SPACE": " ", "CATEGORY_NOT_DIGIT": "abcxyz", "CATEGORY_NOT_WORD": "-. ",
    "CATEGORY_NOT_SPACE": "abcxyz",
}

WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "gale", "harbor", "iris", "jade",
         "kelp", "lumen", "maple", "nova", "onyx", "pine", "quartz", "river", "sage", "tide")


def fabricate(schema: dict[str, Any], rng: random.Random, *, root: dict[str, Any] | None = None,
              name: str = "value", depth: int = 0, list_items: int | None = None) -> Any:
    """A value valid under ``schema`` (the common JSON Schema subset pydantic emits).
    ``list_items`` asks for arrays of that length where the schema's bounds allow."""
    root = root if root is not None else schema
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        return fabricate({**target, **extra}, rng, root=root, name=name, depth=depth, list_items=list_items)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return fabricate(rng.choice(options), rng, root=root, name=name, depth=depth, list_items=list_items)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(part)
        return fabricate(merged, rng, root=root, name=name, depth=depth, list_items=list_items)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", props))
        out = {}
        for key, sub in props.items():
            if key in required or depth < 3:
                out[key] = fabricate(sub, rng, root=root, name=key, depth=depth + 1, list_items=list_items)
        return out
    if kind == "array":
        lo = schema.get("minItems", 1)
        hi = schema.get("maxItems", max(lo, 3))
        if list_items is not None:
            count = max(lo, min(hi, list_items))
        else:
            count = rng.randint(lo, max(lo, min(hi, lo + 3)))
        items = schema.get("items", {"type": "string"})
        values = [fabricate(items, rng, root=root, name=name, depth=depth + 1, list_items=list_items)
                  for _ in range(count)]
        if schema.get("uniqueItems"):
            unique = []
            for v in values:
                if v not in unique:
                    unique.append(v)
            values = unique
        return values
    if kind == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in schema else 0)
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 11) - 1 if "exclusiveMaximum" in schema else lo + 10)
        return rng.randint(int(lo), int(max(lo, hi)))
    if kind == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0.0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 10.0))
        return round(rng.uniform(lo, hi), 2) if hi > lo else float(lo)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng, name)


def from_pattern(pattern: str, rng: random.Random) -> str | None:
    """A string matching ``pattern`` (common regex features), or None when it cannot make one."""
    try:
        parsed = _sre.parse(pattern)
    except re.error:
        return None
    for _ in range(5):
        try:
            text = _generate(parsed, rng)
        except ValueError:
            return None
        if re.fullmatch(pattern, text):
            return text
    return None


def _generate(items: Any, rng: random.Random) -> str:
    """A string of parsed regex ``items`` (module functions, not closures of ``from_pattern``:
    a nested function calling itself is a reference cycle, garbage on every call)."""
    out = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY":
            out.append(rng.choice("abcxyz"))
        elif name == "IN":
            out.append(_pick(arg, rng))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            high = min(high, low + 4) if high != _sre.MAXREPEAT else low + 4
            out.extend(_generate(sub, rng) for _ in range(rng.randint(low, max(low, high))))
        elif name == "SUBPATTERN":
            out.append(_generate(arg[-1], rng))
        elif name == "BRANCH":
            out.append(_generate(rng.choice(arg[1]), rng))
        elif name == "CATEGORY":
            out.append(rng.choice(_CATEGORIES.get(str(arg), "a")))
        elif name == "AT":
            continue
        else:
            raise ValueError(name)
    return "".join(out)


def _pick(alternatives: Any, rng: random.Random) -> str:
    choices: list[str] = []
    negate = False
    for op, arg in alternatives:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            choices.append(chr(arg))
        elif name == "RANGE":
            choices.extend(chr(c) for c in range(arg[0], min(arg[1], arg[0] + 50) + 1))
        elif name == "CATEGORY":
            choices.extend(_CATEGORIES.get(str(arg), "a"))
    if negate:
        choices = [c for c in "abcdefghijklmnopqrstuvwxyz0123456789" if c not in choices]
    return rng.choice(choices or ["a"])


def _string(schema: dict[str, Any], rng: random.Random, name: str) -> str:
    if "pattern" in schema:
        made = from_pattern(schema["pattern"], rng)
        if made is not None:
            return made
    fmt = schema.get("format")
    if fmt == "date":
        return (date(2024, 1, 1) + timedelta(days=rng.randint(0, 365))).isoformat()
    if fmt == "date-time":
        return (date(2024, 1, 1) + timedelta(days=rng.randint(0, 365))).isoformat() + "T12:00:00"
    if fmt == "email":
        return f"{rng.choice(WORDS)}@example.com"
    lo = schema.get("minLength", 1)
    hi = schema.get("maxLength", max(lo, 60))
    text = f"{name} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
    while len(text) < lo:
        text += " " + rng.choice(WORDS)
    return text[:hi]
