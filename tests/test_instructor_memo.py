"""Our patches of instructor's per-call helpers: memoized by class, and the usage tally skipped
for answers without usage (the provider counts tokens itself)."""

from __future__ import annotations

import importlib.abc
import sys

import instructor  # noqa: F401  (imports the modules the patches replace)
from instructor.v2.core import patch as _patch  # noqa: F401
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion

from intellagent_plugins.providers import instructor_memo


def completion(usage: dict | None) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "{}"}}],
        "usage": usage})


class ImportsOf(importlib.abc.MetaPathFinder):
    def __init__(self, name: str) -> None:
        self.name, self.count = name, 0

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] == self.name:
            self.count += 1
        return None


def test_the_usage_helpers_answer_at_once_without_usage_and_tally_with_it():
    instructor_memo.apply()
    from instructor.v2.core import retry

    total = CompletionUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    finder = ImportsOf("anthropic")
    sys.meta_path.insert(0, finder)
    try:
        bare = completion(None)
        assert retry.has_compatible_usage(bare, total) is False
        assert retry.update_total_usage(response=bare, total_usage=total) is bare
        assert finder.count == 0  # nothing looked for the anthropic SDK
        counted = completion({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
        assert retry.has_compatible_usage(counted, total) is True
        retry.update_total_usage(response=counted, total_usage=total)
        assert (total.prompt_tokens, total.completion_tokens) == (7, 3)
    finally:
        sys.meta_path.remove(finder)


def test_apply_is_idempotent_and_patches_every_loaded_reference():
    first = instructor_memo.apply()
    assert first == instructor_memo.apply() >= len(instructor_memo.TARGETS)
    from instructor.v2.core import retry, usage

    assert retry.update_total_usage is usage.update_total_usage
    assert getattr(usage.update_total_usage, "__intellagent_memo__", None) is not None


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
