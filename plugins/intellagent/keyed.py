"""Response models with one field per policy id, made per call at the cost of a class, not a schema.

The scenario draft and the judgement have one field per policy of their event (aliased by the
policy id), so the answer cannot skip, reorder or invent a policy. That makes one class per event,
and pydantic walks each class anew to make its JSON Schema: milliseconds an event. Only the keyed
part differs between events, so the schema is the template of the model (made once, with the keyed
part empty) with the event's keys put in, each shaped as pydantic shapes a field of that type.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

from pydantic import BaseModel, Field, create_model

from intellagent.hashing import json_copy
from intellagent.llm import ResponseModel

Fields = Callable[..., dict[str, Any]]
"""``fields(keyed_class, *args)``: the model's fields (for ``create_model``) around its keyed part."""


def keyed_model(name: str, keyed_name: str, keys: list[str], value: Any, fields: Fields,
                *args: Hashable, describe: Callable[[str], str] | None = None) -> type[ResponseModel]:
    """``create_model(name, **fields(Keyed, *args))`` where ``Keyed`` (``keyed_name``) has a
    required field of type ``value`` per key, in order, aliased by the key and described by
    ``describe(key)``; its JSON Schema is built from the template of (name, fields, args)."""
    keyed = create_model(keyed_name, **{f"p{i}": (value, _field(key, describe)) for i, key in enumerate(keys)})
    model = ResponseModel.derive(name, **fields(keyed, *args))
    schema = json_copy(_template(name, keyed_name, fields, args))
    shape, definitions = _property(value, describe is not None)
    if keys and set(definitions) & (set(schema["$defs"]) | {name, keyed_name}):
        return model  # names pydantic would tell apart (module-qualified): its own walk then
    schema["$defs"][keyed_name] = {
        "properties": {key: _shaped(shape, key, describe) for key in keys},
        **({"required": list(keys)} if keys else {}), "title": keyed_name, "type": "object"}
    if keys and definitions:  # the value's own definitions, in pydantic's (sorted) order
        schema["$defs"] = dict(sorted({**schema["$defs"], **json_copy(definitions)}.items()))
    model.adopt_schema(schema)
    return model


def _field(key: str, describe: Callable[[str], str] | None) -> Any:
    return Field(alias=key, description=describe(key)) if describe else Field(alias=key)


@functools.lru_cache(maxsize=64)
def _template(name: str, keyed_name: str, fields: Fields, args: tuple) -> dict[str, Any]:
    """The model's schema with an empty keyed part (made once per model shape)."""
    return create_model(name, **fields(create_model(keyed_name), *args)).model_json_schema()


KEY, TEXT = "KEY", "TEXT"


@functools.lru_cache(maxsize=64)
def _property(value: Any, described: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """How pydantic shapes one keyed field of type ``value`` (a prototype keyed ``KEY``), and the
    definitions it refers to."""
    prototype = create_model("Prototype", k=(value, Field(alias=KEY, description=TEXT if described else None)))
    schema = prototype.model_json_schema()
    return schema["properties"][KEY], schema.get("$defs", {})


def _shaped(shape: dict[str, Any], key: str, describe: Callable[[str], str] | None) -> dict[str, Any]:
    out = dict(shape)
    if "title" in out:
        out["title"] = key.title().replace("_", " ").strip()  # pydantic's title for an alias
    if describe is not None:
        out["description"] = describe(key)
    return out


def pydantic_schema(model: type[BaseModel]) -> dict[str, Any]:
    """pydantic's own JSON Schema of ``model``, bypassing any adopted one (for tests)."""
    return BaseModel.model_json_schema.__func__(model)  # type: ignore[attr-defined]
