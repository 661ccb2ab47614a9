"""JSON text on the hot paths (an event's database rows, a request's body, schema copies) through
orjson, a C codec several times as fast as the standard library's, with the standard library's
values: where orjson would read or write something else, the standard library does it.

- ``loads`` reads what ``json.loads`` reads, to the same value. orjson reads an integer beyond
  64 bits as a float, so a text with a run of 19 digits is left to the standard library; so is
  what orjson refuses (``NaN``, ``Infinity``, lone surrogates).
- ``dumps`` writes compact text (no spaces) of the same value as ``json.dumps(value,
  ensure_ascii=False, separators=(",", ":"))`` (a float's exponent may read ``1e-7`` for
  ``1e-07``), and what orjson refuses (integers beyond 64 bits, lone surrogates)
  through the standard library in the same form; what the standard library cannot write
  (a datetime, a dataclass) is a ``TypeError`` here too. A float that is not a number (JSON has
  none) is written as ``null``. Not for keys and hashes, whose text must not change with the
  codec.
- ``sorted_dumps`` writes the compact text with sorted keys that a cache key hashes: the same
  value gives the same text every time, a different value a different text (a float that is not
  a number aside, as above); what JSON has no type for is written as its ``str``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))  # digits → 0, else .
_LONG_NUMBER = b"0" * 19  # (a regular expression's search costs more than orjson's whole read)
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_AS_STDLIB = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_SORTED = orjson.OPT_SORT_KEYS | _AS_STDLIB
_COMPACT_SORTED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``."""
    raw = text.encode(errors="surrogatepass") if isinstance(text, str) else text
    if _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN, Infinity, a lone surrogate: the standard library's (or its error)
    return json.loads(text)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (a ``TypeError`` for what JSON cannot hold)."""
    try:
        return orjson.dumps(value, option=_AS_STDLIB).decode()
    except orjson.JSONEncodeError:
        return _COMPACT.encode(value)


def sorted_dumps(value: Any) -> str:
    """Compact JSON text of ``value`` with every object's keys sorted, ``str(x)`` for an ``x``
    JSON has no type for (``json.dumps(value, ensure_ascii=False, separators=(",", ":"),
    sort_keys=True, default=str)``, a float's exponent aside). A value orjson refuses (an integer
    beyond 64 bits, a key that is not a string, a lone surrogate) always goes to the standard
    library, so a value's text does not depend on anything but the value."""
    try:
        return orjson.dumps(value, default=str, option=_SORTED).decode()
    except orjson.JSONEncodeError:
        return _COMPACT_SORTED.encode(value)


def copy(value: Any) -> Any:
    """``json.loads(json.dumps(value))``: a deep copy of plain JSON data (a float that is not a
    number becomes None, as ``dumps`` writes it)."""
    try:
        return loads(orjson.dumps(value, option=_AS_STDLIB))
    except orjson.JSONEncodeError:
        return json.loads(json.dumps(value))
