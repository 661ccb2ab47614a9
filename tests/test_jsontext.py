"""The hot paths' JSON codec: orjson's speed, the standard library's values."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import random

import pytest

from intellagent import jsontext
from intellagent.environment import load_environment
from intellagent.hashing import json_copy

EDGES = [
    2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 2 ** 64, -2 ** 63 - 1, 10 ** 30, -(10 ** 19),
    1e16, 1e-7, 0.1, 1.0, -0.0, 5e-324, 1.7976931348623157e308, 123456789012345678.5,
    "", "Réservez — 東京 \"q\" \\ \n\t\u2028\u0000\u007f", "\ud800 lone", "1234567890123456789012",
    True, False, None, [], {}, {"": [None, {"a": {"b": [1, "2", 3.5]}}]},
]


def random_json(rng: random.Random, depth: int = 0):
    kind = rng.choice(["int", "bigint", "float", "str", "bool", "none"] + ["list", "dict"] * (depth < 4))
    if kind == "int":
        return rng.randint(-10 ** 6, 10 ** 6)
    if kind == "bigint":
        return rng.choice([-1, 1]) * rng.randint(2 ** 62, 2 ** 70)
    if kind == "float":
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-300, 300)])
    if kind == "str":
        return "".join(rng.choice("ab é東\"\\\n\x01\U0001F600") for _ in range(rng.randint(0, 12)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{rng.randint(0, 9)}": random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def has_float(value) -> bool:
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_float(v) for v in value)
    return isinstance(value, float)


def test_values_read_and_written_are_the_standard_librarys():
    rng = random.Random(7)
    values = EDGES + [random_json(rng) for _ in range(3000)]
    for value in values:
        standard = json.dumps(value, ensure_ascii=False)
        read = jsontext.loads(standard)
        assert read == json.loads(standard) and repr(read) == repr(json.loads(standard)), standard
        if "\ud800" not in standard:  # bytes too, as orjson takes them (UTF-8 has no surrogate)
            assert jsontext.loads(standard.encode()) == read
        text = jsontext.dumps(value)
        assert json.loads(text) == value and repr(json.loads(text)) == repr(value), value
        if not has_float(value):  # a float's exponent may be written otherwise (1e-7, 1e-07)
            assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":")), value
        copied = jsontext.copy(value)
        assert copied == value and repr(copied) == repr(value)
    # integers beyond 64 bits stay integers (orjson alone reads them as floats)
    assert jsontext.loads("[18446744073709551616, -9223372036854775809]") == [2 ** 64, -2 ** 63 - 1]
    assert type(jsontext.loads("-9223372036854775809")) is int


def test_what_only_the_standard_library_reads_or_refuses_is_its_call():
    assert math.isnan(jsontext.loads("NaN")) and jsontext.loads("[Infinity]") == [math.inf]
    assert jsontext.loads('"\\ud800"') == "\ud800"
    with pytest.raises(json.JSONDecodeError):
        jsontext.loads('{"a": ')
    with pytest.raises(ValueError):
        jsontext.loads(b"\xff")
    for unwritable in (datetime.date(2024, 1, 2), {1, 2}, object(), dataclasses.make_dataclass("D", [])()):
        with pytest.raises(TypeError):
            jsontext.dumps({"x": unwritable})
        with pytest.raises(TypeError):
            json_copy([unwritable])
    assert jsontext.dumps({1: "a", "b": [1]}) == '{"1":"a","b":[1]}'  # as json.dumps turns keys
    assert jsontext.dumps(float("nan")) == "null"  # JSON has no NaN (documented)


def test_copies_are_deep_and_independent():
    value = {"a": [{"b": 1}], "c": "d"}
    copied = json_copy(value)
    copied["a"][0]["b"] = 2
    assert value == {"a": [{"b": 1}], "c": "d"}


def test_json_columns_keep_their_values_through_the_event_database(shop):
    db = load_environment(shop).seed_database()
    items = [{"sku": "Z", "qty": 2 ** 64 + 1, "price": 0.1, "name": "Café 東京"}, [None, True, -2 ** 63 - 5]]
    db.put("orders", "o9", {"order_id": "o9", "customer_id": "c1", "items": items})
    assert db.get("orders", "o9")["items"] == items
    again = db.copy()
    assert again.get("orders", "o9") == db.get("orders", "o9") and again.hash() == db.hash()
