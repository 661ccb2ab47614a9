"""Response models with one entry per policy id, made per call at the cost of an empty subclass.

The scenario draft and the judgement have one entry per policy of their event, keyed by the
policy id, so the answer cannot skip, reorder or invent a policy. The model is told so by the
JSON Schema: one required property per id, in order. That schema differs from event to event, and
the structured-output library takes the schema from the class, so each event needs a class of its
own. Making one with a field per id costs pydantic milliseconds (two models, walked and compiled);
here the fields are made once per model shape, with the keyed part a ``dict[str, value]`` checked
against the class's ``keys`` after validation, and each event's class is an empty subclass that
only sets ``keys`` and adopts its schema. The schema is the template of the model (made once, with
the keyed part empty) with the event's keys put in, each shaped as pydantic shapes a field of
that type: the schema pydantic itself makes of the model with a field per id
(:func:`per_key_model`), which the tests compare it with.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Hashable

from pydantic import Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from intellagent.hashing import json_copy
from intellagent.llm import ResponseModel

Fields = Callable[..., dict[str, Any]]
"""``fields(keyed_type, *args)``: the model's fields (for ``create_model``) around its keyed part."""


class KeyedResponse(ResponseModel):
    """A response model whose field ``keyed_field`` holds one value per key of ``keys``: an
    answer that lacks one is invalid (the re-ask names the missing keys); an unknown key is
    dropped, and the entries come back in the order of ``keys``."""

    keys: ClassVar[tuple[str, ...]] = ()
    keyed_field: ClassVar[str] = ""

    @model_validator(mode="after")
    def _every_key(self) -> "KeyedResponse":
        entries = getattr(self, self.keyed_field)
        missing = [key for key in self.keys if key not in entries]
        if missing:
            raise PydanticCustomError("missing_keys", "{field} has no entry for {missing} (it needs one "
                                      "for each of {keys}, under that key)",
                                      {"field": self.keyed_field, "missing": ", ".join(missing),
                                       "keys": ", ".join(self.keys)})
        setattr(self, self.keyed_field, {key: entries[key] for key in self.keys})
        return self


def keyed_model(name: str, keyed_name: str, keys: list[str], value: Any, fields: Fields,
                *args: Hashable, describe: Callable[[str], str] | None = None) -> type[KeyedResponse]:
    """A model of ``fields(dict[str, value], *args)`` whose keyed part holds one ``value`` per
    key, in order; its JSON Schema is pydantic's schema of :func:`per_key_model` (where the keyed
    part is a model ``keyed_name`` with a required field per key, aliased by the key and described
    by ``describe(key)``), built from the template of (name, fields, args)."""
    base = _base(name, value, fields, args, ResponseModel.mixins)
    model = type(name, (base,), {"__module__": base.__module__, "__doc__": base.__doc__, "keys": tuple(keys)})
    template = _template(name, keyed_name, fields, args)
    shape, definitions = _property(value, describe is not None)
    if keys and set(definitions) & (set(template["$defs"]) | {name, keyed_name}):
        # names pydantic would tell apart (module-qualified): its own walk then
        reference = per_key_model(name, keyed_name, keys, value, fields, *args, describe=describe)
        schema = reference.model_json_schema()
    else:
        schema = json_copy(template)
        schema["$defs"][keyed_name] = {
            "properties": {key: _shaped(shape, key, describe) for key in keys},
            **({"required": list(keys)} if keys else {}), "title": keyed_name, "type": "object"}
        if keys and definitions:  # the value's own definitions, in pydantic's (sorted) order
            schema["$defs"] = dict(sorted({**schema["$defs"], **json_copy(definitions)}.items()))
    model.adopt_schema(schema)
    return model


@functools.lru_cache(maxsize=64)
def _base(name: str, value: Any, fields: Fields, args: tuple, mixins: tuple[type, ...]) -> type[KeyedResponse]:
    """The model's fields, with the keyed part a dict (made once per model shape and set of
    providers' mixins: a provider loaded later adds its own)."""
    mapping = dict[str, value]
    spec = fields(mapping, *args)
    keyed_field = next(field for field, (annotation, _) in spec.items() if annotation is mapping)
    base = KeyedResponse.derive(name, **spec)
    base.keyed_field = keyed_field
    return base


def per_key_model(name: str, keyed_name: str, keys: list[str], value: Any, fields: Fields,
                  *args: Hashable, describe: Callable[[str], str] | None = None) -> type[ResponseModel]:
    """``create_model(name, **fields(Keyed, *args))`` where ``Keyed`` (``keyed_name``) has a
    required field of type ``value`` per key, in order, aliased by the key and described by
    ``describe(key)``: the model whose schema a keyed model adopts (pydantic's own walk)."""
    keyed = create_model(keyed_name, **{f"p{i}": (value, _field(key, describe)) for i, key in enumerate(keys)})
    return create_model(name, __base__=ResponseModel, **fields(keyed, *args))


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
