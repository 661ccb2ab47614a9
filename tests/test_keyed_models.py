"""Per-event response models (one entry per policy id): their JSON Schema comes from a template
and must be exactly pydantic's own schema of the model with a field per policy id, key order
included (the model sees it and the cache key hashes it), and they must accept exactly what that
model accepts."""

from __future__ import annotations

import abc
import json

import pytest
from pydantic import ValidationError

from intellagent_plugins.intellagent.artefacts import EventPolicy
from intellagent_plugins.intellagent.critic import PolicyFinding, _judgement_fields, _judgement_model
from intellagent_plugins.intellagent.generator import _draft_fields, _draft_model, _expected_text
from intellagent_plugins.intellagent.keyed import per_key_model

IDS = [["P1"], ["P1", "P4"], ["refund-policy.2", "cancel_within_24h", "Zz9_q-1"],
       ["über-rule", "a b", "X", "p0", "p1"], []]
FINDING = {"exercised": True, "violated": False, "reason": "r"}


def policies(ids: list[str]) -> list[EventPolicy]:
    return [EventPolicy(id=i, text="t", category="other", challenge=2) for i in ids]


@pytest.mark.parametrize("ids", IDS)
@pytest.mark.parametrize("tables", [["users", "flights", "reservations"], []])
def test_the_draft_schema_is_pydantics_own(ids, tables):
    model = _draft_model(policies(ids), tables, 4)
    reference = per_key_model("ScenarioDraft", "ExpectedBehaviour", ids, str, _draft_fields, tuple(tables), 4,
                              describe=_expected_text)
    assert json.dumps(model.model_json_schema()) == json.dumps(reference.model_json_schema())
    assert list(model.model_json_schema()["$defs"]["ExpectedBehaviour"]["properties"]) == ids


@pytest.mark.parametrize("ids", IDS)
def test_the_judgement_schema_is_pydantics_own(ids):
    model = _judgement_model(policies(ids))
    reference = per_key_model("Judgement", "Findings", ids, PolicyFinding, _judgement_fields)
    assert json.dumps(model.model_json_schema()) == json.dumps(reference.model_json_schema())


def test_models_of_two_events_keep_their_own_schemas_and_keys():
    """Each event's class is a subclass of one shared class: neither its schema nor its keys
    leak to another event's."""
    a, b = _judgement_model(policies(["A1", "A2"])), _judgement_model(policies(["B1"]))
    assert list(a.model_json_schema()["$defs"]["Findings"]["properties"]) == ["A1", "A2"]
    assert list(b.model_json_schema()["$defs"]["Findings"]["properties"]) == ["B1"]
    assert b.model_validate({"policies": {"B1": FINDING}, "completed": True}).policies["B1"].reason == "r"
    with pytest.raises(ValidationError):
        a.model_validate({"policies": {"B1": FINDING}, "completed": True})


@pytest.mark.parametrize("answer,valid", [
    ({"P1": FINDING, "P2": FINDING}, True),
    ({"P2": FINDING, "P1": FINDING}, True),                       # any order: read back in the keys' order
    ({"P1": FINDING, "P2": FINDING, "P9": FINDING}, True),        # an invented id: dropped (ignored by both)
    ({"P1": FINDING}, False),                                     # a missing id
    ({"p0": FINDING, "p1": FINDING}, False),                      # the field names are not the keys
    ({"P1": FINDING, "P2": {"exercised": True, "violated": False}}, False),  # an entry that does not fit
    ({"P1": FINDING, "P2": "yes"}, False),
])
def test_a_keyed_model_accepts_what_the_per_key_model_accepts(answer, valid):
    ids = ["P1", "P2"]
    model = _judgement_model(policies(ids))
    reference = per_key_model("Judgement", "Findings", ids, PolicyFinding, _judgement_fields)
    data = {"policies": answer, "completed": True}
    for strict in (False, True):  # instructor validates strictly
        if not valid:
            with pytest.raises(ValidationError):
                model.model_validate_json(json.dumps(data), strict=strict)
            with pytest.raises(ValidationError):
                reference.model_validate_json(json.dumps(data), strict=strict)
            continue
        value = model.model_validate_json(json.dumps(data), strict=strict)
        same = reference.model_validate_json(json.dumps(data), strict=strict)
        assert list(value.policies) == ids
        assert json.dumps(value.model_dump(by_alias=True)) == json.dumps(same.model_dump(by_alias=True))


def test_an_events_class_gives_its_own_instances_and_checks_its_keys_on_every_path():
    """An event's class is made without pydantic's metaclass and validates with its base's
    validator: every way in (JSON, Python data, the constructor, another event's answer) checks
    the event's own keys and gives an instance of the event's class that dumps as pydantic's."""
    import warnings

    a, b = _judgement_model(policies(["A1", "A2"])), _judgement_model(policies(["B1"]))
    assert "__pydantic_validator__" not in a.__dict__  # nothing compiled for it
    data = {"policies": {"A2": FINDING, "A1": FINDING}, "completed": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic warns when a serializer gets an unexpected type
        made = [a.model_validate_json(json.dumps(data), strict=True), a.model_validate(data),
                a.model_validate_strings({"policies": {"A1": {**FINDING, "exercised": "true", "violated": "false"},
                                                       "A2": {**FINDING, "exercised": "1", "violated": "0"}},
                                          "completed": "true"}), a(**data)]
        for value in made:
            assert type(value) is a and list(value.policies) == ["A1", "A2"]
            assert json.loads(value.model_dump_json(by_alias=True))["policies"]["A1"] == FINDING
            assert a.model_validate(value) is value and value.model_copy() == value
    only_a1 = {"policies": {"A1": FINDING}, "completed": True}
    for attempt in (lambda: a.model_validate_json(json.dumps(only_a1)), lambda: a.model_validate(only_a1),
                    lambda: a.model_validate_strings({"policies": {"A1": {**FINDING, "exercised": "true",
                                                                          "violated": "false"}}, "completed": "true"}),
                    lambda: a(**only_a1),
                    lambda: a.model_validate(b.model_validate({"policies": {"B1": FINDING}, "completed": True}))):
        with pytest.raises(ValidationError, match="no entry for (A1, )?A2 "):
            attempt()
    assert type(b.model_validate({"policies": {"B1": FINDING}, "completed": True}, context={"x": 1})) is b
    # each event's class is a class of its own to isinstance and issubclass, ABC's caches included
    assert abc.ABCMeta.__subclasscheck__(a.__bases__[0], a) and not abc.ABCMeta.__subclasscheck__(b, a)
    assert isinstance(made[0], a.__bases__[0]) and not isinstance(made[0], b) and not issubclass(a, b)


def test_a_missing_id_is_named_in_the_error_the_model_is_re_asked_with():
    model = _judgement_model(policies(["P1", "P2", "P3"]))
    with pytest.raises(ValidationError) as caught:
        model.model_validate({"policies": {"P2": FINDING}, "completed": True})
    assert "no entry for P1, P3" in str(caught.value)


def test_a_value_type_whose_name_clashes_falls_back_to_pydantics_walk():
    """pydantic tells two models of one name apart by module; the template cannot, so such a
    keyed model takes pydantic's own schema of the per-key model."""
    from pydantic import create_model

    from intellagent_plugins.intellagent.keyed import keyed_model

    Other = create_model("Inner", x=(int, ...))  # the same name as a template definition

    def fields(keyed):
        inner = create_model("Inner", y=(str, ...))
        return {"inner": (inner, ...), "keyed": (keyed, ...)}

    model = keyed_model("Outer", "Keyed", ["a", "b"], Other, fields)
    reference = per_key_model("Outer", "Keyed", ["a", "b"], Other, fields)
    assert json.dumps(model.model_json_schema()) == json.dumps(reference.model_json_schema())
    assert model.model_validate({"inner": {"y": "s"}, "keyed": {"a": {"x": 1}, "b": {"x": 2}}}).keyed["b"].x == 2
