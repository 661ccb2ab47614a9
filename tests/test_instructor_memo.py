"""Our patches of instructor's per-call helpers: memoized by class."""

from __future__ import annotations

import instructor  # noqa: F401  (imports the modules the patches replace)
from instructor.v2.core import patch as _patch  # noqa: F401

import pytest

from intellagent_plugins.providers import instructor_memo


def test_apply_is_idempotent_and_patches_every_loaded_reference():
    first = instructor_memo.apply()
    assert first == instructor_memo.apply() >= len(instructor_memo.TARGETS)
    from instructor.v2.core import patch, response_model

    assert patch.prepare_response_model is response_model.prepare_response_model
    assert getattr(response_model.prepare_response_model, "__intellagent_memo__", None) is not None


def test_per_call_models_are_taken_by_instructor_as_they_are():
    """The provider adds instructor's ResponseSchema to every derived response model, so a
    model made per call (a judgement per event) costs no wrapper class of instructor's."""
    from instructor.v2.core.response_model import prepare_response_model

    from intellagent_plugins.intellagent.artefacts import EventPolicy
    from intellagent_plugins.intellagent.critic import _judgement_model
    from intellagent_plugins.providers import openai_compatible  # noqa: F401  (adds the mixin)

    model = _judgement_model([EventPolicy(id="P1", text="t", category="other", challenge=2)])
    assert prepare_response_model(model) is model
    tool = model.openai_schema
    assert tool["name"] == "Judgement"
    assert tool["parameters"]["properties"] == model.model_json_schema()["properties"]


def test_the_async_validator_check_of_a_per_call_subclass_is_its_bases():
    """A per-event model (an empty subclass setting its keys) is checked once through its base;
    a subclass that adds an async validator is still refused."""
    from instructor.v2.validation.async_validators import async_field_validator
    from instructor.v2.validation import async_validators

    from intellagent_plugins.intellagent.critic import _judgement_model
    from intellagent_plugins.providers import openai_compatible  # noqa: F401  (applies the memo)

    from tests.test_keyed_models import policies

    check = async_validators.reject_async_validators
    first, second = _judgement_model(policies(["A"])), _judgement_model(policies(["B", "C"]))
    assert instructor_memo._checked_as(first) is instructor_memo._checked_as(second) is first.__bases__[0]
    check(first), check(second)

    class Marked(second):
        @async_field_validator("completion_reason")
        async def slow(self, value):
            return value

    assert instructor_memo._checked_as(Marked) is Marked
    with pytest.raises(ValueError, match="async validators"):
        check(Marked)


def test_a_docstring_is_parsed_once_for_every_class_that_shares_it():
    """instructor reads each class's docstring for its tool schema; classes made per event
    share one, which is parsed once, and each schema still takes its parameter descriptions."""
    from pydantic import BaseModel, create_model

    instructor_memo.apply()
    from instructor.v2.providers.openai import schema

    assert getattr(schema.parse, "__intellagent_memo__", None) is not None
    doc = "Pick a seat.\n\nArgs:\n    seat: the seat's number\n"
    first, second = (create_model(f"Pick{i}", __base__=BaseModel, __doc__=doc, seat=(int, ...))
                     for i in range(2))
    parses = schema.parse.cache_info()
    tools = [schema.generate_openai_schema(m) for m in (first, second)]
    after = schema.parse.cache_info()
    assert (after.misses - parses.misses, after.hits - parses.hits) in {(1, 1), (0, 2)}
    assert [t["parameters"]["properties"]["seat"]["description"] for t in tools] == ["the seat's number"] * 2
    assert tools[0]["description"] == tools[1]["description"]
    assert tools[0]["description"].startswith("Pick a seat.")


def test_a_per_call_model_is_not_kept_once_more_recent_ones_have_taken_its_place():
    """A step makes a response class per event and asks for it again only within that call: the
    memoized helpers (and instructor's own tool schema cache, bounded the same way) keep the
    most recent ``MAX_ENTRIES`` classes, and an older one is freed with its schemas."""
    import gc
    import weakref

    from instructor.v2.core.response_model import prepare_response_model
    from instructor.v2.providers.openai import schema

    from intellagent.llm.types import schema_of
    from intellagent_plugins.intellagent.critic import _judgement_model
    from intellagent_plugins.providers import openai_compatible  # noqa: F401  (applies the memo)

    from tests.test_keyed_models import policies

    assert schema.generate_openai_schema.cache_info().maxsize == instructor_memo.MAX_ENTRIES

    def use(ids: list[str]) -> weakref.ref:
        model = _judgement_model(policies(ids))
        prepare_response_model(model), schema.generate_openai_schema(model), schema_of(model)
        return weakref.ref(model)

    first = use(["OLD1"])
    gc.collect()
    assert first() is not None  # still among the recent ones
    recent = [use([f"P{i}"]) for i in range(instructor_memo.MAX_ENTRIES)]
    gc.collect()
    assert first() is None
    assert recent[-1]() is not None
