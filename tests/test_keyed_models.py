"""Per-event response models (one field per policy id): their JSON Schema comes from a template
and must be exactly pydantic's own, key order included: the model sees it and the cache key
hashes it."""

from __future__ import annotations

import json

import pytest

from intellagent_plugins.intellagent.artefacts import EventPolicy
from intellagent_plugins.intellagent.critic import _judgement_model
from intellagent_plugins.intellagent.generator import _draft_model
from intellagent_plugins.intellagent.keyed import pydantic_schema

IDS = [["P1"], ["P1", "P4"], ["refund-policy.2", "cancel_within_24h", "Zz9_q-1"],
       ["über-rule", "a b", "X", "p0", "p1"], []]


def policies(ids: list[str]) -> list[EventPolicy]:
    return [EventPolicy(id=i, text="t", category="other", challenge=2) for i in ids]


@pytest.mark.parametrize("ids", IDS)
@pytest.mark.parametrize("tables", [["users", "flights", "reservations"], []])
def test_the_draft_schema_is_pydantics_own(ids, tables):
    model = _draft_model(policies(ids), tables, 4)
    assert json.dumps(model.model_json_schema()) == json.dumps(pydantic_schema(model))
    assert list(model.model_json_schema()["$defs"]["ExpectedBehaviour"]["properties"]) == ids


@pytest.mark.parametrize("ids", IDS)
def test_the_judgement_schema_is_pydantics_own(ids):
    model = _judgement_model(policies(ids))
    assert json.dumps(model.model_json_schema()) == json.dumps(pydantic_schema(model))


def test_a_keyed_model_still_validates_by_its_own_fields():
    """The adopted schema changes nothing in validation: every key is required, by its alias."""
    model = _judgement_model(policies(["P1", "P2"]))
    finding = {"exercised": True, "violated": False, "reason": "r"}
    value = model.model_validate({"policies": {"P1": finding, "P2": finding}, "completed": True})
    assert value.policies.p1.reason == "r"
    with pytest.raises(ValueError):
        model.model_validate({"policies": {"P1": finding}, "completed": True})


def test_a_value_type_whose_name_clashes_falls_back_to_pydantics_walk():
    """pydantic tells two models of one name apart by module; the template cannot, so such a
    keyed model keeps pydantic's own schema."""
    from pydantic import create_model

    from intellagent_plugins.intellagent.keyed import keyed_model

    Other = create_model("Inner", x=(int, ...))  # the same name as a template definition

    def fields(keyed):
        inner = create_model("Inner", y=(str, ...))
        return {"inner": (inner, ...), "keyed": (keyed, ...)}

    model = keyed_model("Outer", "Keyed", ["a", "b"], Other, fields)
    assert json.dumps(model.model_json_schema()) == json.dumps(pydantic_schema(model))
    assert model.model_validate({"inner": {"y": "s"}, "keyed": {"a": {"x": 1}, "b": {"x": 2}}}).keyed.p1.x == 2
