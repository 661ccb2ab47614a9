"""Response models with one entry per policy id, made per call at the cost of a plain class.

The scenario draft and the judgement have one entry per policy of their event, keyed by the
policy id, so the answer cannot skip, reorder or invent a policy. The model is told so by the
JSON Schema: one required property per id, in order. That schema differs from event to event, and
the structured-output library takes the schema from the class, so each event needs a class of its
own. Making one with a field per id costs pydantic milliseconds (two models, walked and compiled);
here the fields are made once per model shape, with the keyed part a ``dict[str, value]`` checked
against the class's ``keys`` after validation. The schema is the template of the model (made once,
with the keyed part empty) with the event's keys put in, each shaped as pydantic shapes a field of
that type: the schema pydantic itself makes of the model with a field per id
(:func:`per_key_model`), which the tests compare it with.

Each event's class is a subclass of that shape's class that only sets ``keys`` and adopts its
schema, made as a plain Python class (``type.__new__``), not by pydantic's metaclass: pydantic
would compile a validator and a serializer of its own for it (0.5 ms, though the fields are the
base's). The subclass uses the base's, which pydantic finds on it by inheritance: its validation
gives the keys to the check through the validation context and hands back an instance of the
subclass. The tests hold it to the per-key model's behaviour, strict and lax.
"""

from __future__ import annotations

import abc
import functools
from typing import Any, Callable, ClassVar, Hashable

from pydantic import Field, ValidationInfo, create_model, model_validator
from pydantic_core import PydanticCustomError

from intellagent.hashing import json_copy
from intellagent.llm import ResponseModel

Fields = Callable[..., dict[str, Any]]
"""``fields(keyed_type, *args)``: the model's fields (for ``create_model``) around its keyed part."""

_KEYS = "intellagent.keyed"
"""The validation context's entry that names the keys of the class being validated."""


class KeyedResponse(ResponseModel):
    """A response model whose field ``keyed_field`` holds one value per key of ``keys``: an
    answer that lacks one is invalid (the re-ask names the missing keys); an unknown key is
    dropped, and the entries come back in the order of ``keys``."""

    keys: ClassVar[tuple[str, ...]] = ()
    keyed_field: ClassVar[str] = ""

    @model_validator(mode="after")
    def _every_key(self, info: ValidationInfo) -> "KeyedResponse":
        keys = info.context[_KEYS] if info.context and _KEYS in info.context else self.keys
        entries = getattr(self, self.keyed_field)
        missing = [key for key in keys if key not in entries]
        if missing:
            raise PydanticCustomError("missing_keys", "{field} has no entry for {missing} (it needs one "
                                      "for each of {keys}, under that key)",
                                      {"field": self.keyed_field, "missing": ", ".join(missing),
                                       "keys": ", ".join(keys)})
        setattr(self, self.keyed_field, {key: entries[key] for key in keys})
        return self

    # An event's class validates with its base's validator, which makes instances of the base:
    # these give it the event's keys and make the instance the event's class. (Made directly,
    # ``Event(**data)``, pydantic validates into an instance of the event's class already.)

    @classmethod
    def model_validate(cls, obj: Any, *, context: Any = None, **kwargs: Any) -> Any:
        if isinstance(obj, KeyedResponse) and type(obj) is not cls and "_event" in cls.__dict__:
            obj = obj.model_dump(by_alias=True)  # another event's answer (the base's validator would pass it)
        return cls._own(super().model_validate(obj, context=cls._context(context), **kwargs))

    @classmethod
    def model_validate_json(cls, json_data: Any, *, context: Any = None, **kwargs: Any) -> Any:
        return cls._own(super().model_validate_json(json_data, context=cls._context(context), **kwargs))

    @classmethod
    def model_validate_strings(cls, obj: Any, *, context: Any = None, **kwargs: Any) -> Any:
        return cls._own(super().model_validate_strings(obj, context=cls._context(context), **kwargs))

    @classmethod
    def _context(cls, context: Any) -> Any:
        return {**(context or {}), _KEYS: cls.keys} if "_event" in cls.__dict__ else context

    @classmethod
    def _own(cls, value: Any) -> Any:
        if type(value) is not cls and "_event" in cls.__dict__:
            object.__setattr__(value, "__class__", cls)  # the same layout (no slots of its own)
        return value


def keyed_model(name: str, keyed_name: str, keys: list[str], value: Any, fields: Fields,
                *args: Hashable, describe: Callable[[str], str] | None = None) -> type[KeyedResponse]:
    """A model of ``fields(dict[str, value], *args)`` whose keyed part holds one ``value`` per
    key, in order; its JSON Schema is pydantic's schema of :func:`per_key_model` (where the keyed
    part is a model ``keyed_name`` with a required field per key, aliased by the key and described
    by ``describe(key)``), built from the template of (name, fields, args)."""
    base = _base(name, value, fields, args, ResponseModel.mixins)
    model = type.__new__(type(base), name, (base,), {  # not pydantic's metaclass: see the module
        "__module__": base.__module__, "__qualname__": name, "__doc__": base.__doc__, "__slots__": (),
        "keys": tuple(keys), "_event": True})
    abc._abc_init(model)  # its own ABC caches, as ABCMeta.__new__ gives a class (not its base's)
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
