"""Our patches of instructor's per-call helpers: memoized by class."""

from __future__ import annotations

import instructor  # noqa: F401  (imports the modules the patches replace)
from instructor.v2.core import patch as _patch  # noqa: F401

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
