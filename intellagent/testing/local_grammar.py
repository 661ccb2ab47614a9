"""What a local server's grammar makes of a JSON Schema: the parts llama.cpp's
json-schema-to-grammar converter (``common/json-schema-to-grammar.cpp``, also behind
llama-cpp-python and Ollama's structured output) would ignore or refuse.

A constraint the grammar drops is not enforced while the model writes: the answer may break it
and fail validation on every attempt (a ``\\d`` in a pattern once turned an entity symbol into
"any string", and the model wrote database keys instead). Response models keep to the subset
the converter reads; ``grammar_problems`` names each part outside it.
"""

from __future__ import annotations

from typing import Any

#: Keywords that only annotate (no constraint to lose).
ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
               "deprecated", "readOnly", "writeOnly", "discriminator"}
#: Keywords the converter reads, by the kind of schema that reads them.
READ = {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
        "prefixItems", "minItems", "maxItems", "pattern", "minLength", "maxLength", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
        "$ref", "$defs", "definitions"}
FORMATS = {"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"}
NON_LITERAL = set("|.()[]{}*+?^$")
ESCAPED_LITERALS = set("^$.[]()|{}*+?")  # "\." is the literal dot
HEX = {"x": 2, "u": 4, "U": 8}
SIMPLE_ESCAPES = set('trn\\"[]-')


def grammar_problems(schema: dict[str, Any]) -> list[str]:
    """Each part of ``schema`` the converter would ignore, as ``path: why``; empty when a local
    grammar enforces all of it."""
    problems: list[str] = []
    _walk(schema, "#", problems)
    return problems


def _walk(node: Any, path: str, problems: list[str]) -> None:
    if isinstance(node, bool) or not isinstance(node, dict):
        return
    for key in node:
        if key not in READ and key not in ANNOTATIONS:
            problems.append(f"{path}: '{key}' is not read by the grammar")
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "number" in kinds and "integer" not in kinds:
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in node:
                problems.append(f"{path}: '{key}' of a number is not read by the grammar (integers only)")
    fmt = node.get("format")
    if fmt is not None and fmt not in FORMATS:
        problems.append(f"{path}: format '{fmt}' is not read by the grammar")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        why = pattern_problem(pattern)
        if why:
            problems.append(f"{path}: pattern {pattern!r} {why}")
    for key in ("properties", "$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            _walk(child, f"{path}/{key}/{name}", problems)
    for key in ("items", "additionalProperties"):
        _walk(node.get(key), f"{path}/{key}", problems)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, child in enumerate(node.get(key) or []):
            _walk(child, f"{path}/{key}/{i}", problems)


def _escape_length(pattern: str, i: int) -> int:
    """Characters of the escape at ``i`` that a grammar reads (0: one it cannot)."""
    if i + 1 >= len(pattern) or pattern[i] != "\\":
        return 0
    c = pattern[i + 1]
    if c in SIMPLE_ESCAPES:
        return 2
    n = HEX.get(c)
    if n is None or i + 2 + n > len(pattern):
        return 0
    digits = pattern[i + 2:i + 2 + n]
    return 2 + n if all(d in "0123456789abcdefABCDEF" for d in digits) else 0


def pattern_problem(pattern: str) -> str | None:
    """Why the converter would take ``pattern`` for "any string" (or refuse it), or None: it
    must be anchored with ^ and $, and hold only literals, ``.``, groups (``(?:`` at most),
    alternation, character classes and the quantifiers ``* + ? {m,n}``; escapes are limited to
    the escaped metacharacters, ``\\t \\r \\n \\\\ \\" \\[ \\] \\-`` and hex escapes (no ``\\d``,
    ``\\w``, ``\\s``, ``\\b``, no lookaround, no anchor inside)."""
    if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
        return "is not anchored with '^' and '$'"
    body = pattern[1:-1]
    i, depth = 0, 0
    while i < len(body):
        c = body[i]
        if c == "(":
            if body[i + 1:i + 2] == "?":
                if body[i + 2:i + 3] != ":":
                    return "uses a group syntax the grammar lacks (lookaround, named group or flags)"
                i += 2
            depth += 1
            i += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return "has unbalanced parentheses"
            i += 1
        elif c in "^$":
            return "has an anchor inside the pattern"
        elif c == "[":
            i += 1
            while i < len(body) and body[i] != "]":
                if body[i] == "\\":
                    n = _escape_length(body, i)
                    if not n:
                        return f"uses the escape {body[i:i + 2]} in a character class"
                    i += n
                else:
                    i += 1
            if i >= len(body):
                return "has an unterminated character class"
            i += 1
        elif c == "{":
            end = body.find("}", i)
            if end < 0:
                return "has unterminated curly brackets"
            numbers = body[i + 1:end].split(",")
            if len(numbers) not in (1, 2) or not all(n.strip().isdigit() or (n == "" and len(numbers) == 2)
                                                     for n in numbers):
                return f"has a repetition {body[i:end + 1]} the grammar cannot read"
            i = end + 1
        elif c in "|.*+?":
            i += 1
        elif c == "\\":
            if i + 1 >= len(body):
                return "ends with a backslash"
            if body[i + 1] in ESCAPED_LITERALS:
                i += 2
            else:
                n = _escape_length(body, i)
                if not n:
                    return f"uses the escape {body[i:i + 2]}, which the grammar reads as 'any string'"
                i += n
        elif c in "]}":
            return f"has a stray '{c}'"
        else:
            i += 1
    return "has unbalanced parentheses" if depth else None
