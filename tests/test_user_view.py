"""The simulated user's view grows by appending only, and holds what the user said, not its
earlier private thoughts (unless the persona asks for them): each call's prompt is the previous
one plus the new turn, which a provider's prompt cache discounts."""

from __future__ import annotations

import asyncio

from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.harness import run_step
from intellagent_plugins.agents.agents import PythonAgent, PythonConfig
from intellagent_plugins.dialogue.scenario import Scenario
from intellagent_plugins.dialogue.simulator import UserAgent, UserConfig
from intellagent_plugins.providers.mock import FunctionModel
from tests.conftest import REPO


def user(request, model):
    turns = sum(1 for m in request.messages if m["role"] == "assistant")
    return {"thought": f"SECRET PLAN {turns}", "message": f"message {turns}",
            "stop": "continue" if turns < 3 else "success", "reason": "done"}


def agent(messages, tools):
    return f"reply to {messages[-1]['content']}"


def play(**config):
    model = FunctionModel(user)
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), providers={"test/fn": model})
    env = load_environment(REPO / "environments" / "education")
    out = asyncio.run(run_step(UserAgent(UserConfig(**config)), env, llm=llm,
                               agent=lambda gt: PythonAgent(PythonConfig(callable="tests.test_user_view:agent"), None),
                               scenario=Scenario(id="S1", brief="Ask for help with fractions.")))
    return out.value, [r.messages for r in model.history]


def test_each_user_prompt_is_the_previous_one_plus_the_new_turn():
    dialog, prompts = play()
    assert len(prompts) == 4 and dialog.stop_reason == "success"
    for previous, current in zip(prompts, prompts[1:]):
        assert current[:len(previous)] == previous
        assert [m["role"] for m in current[len(previous):]] == ["assistant", "user"]


def test_the_view_holds_what_the_user_said_not_its_thoughts():
    dialog, prompts = play()
    said = [m["content"] for m in prompts[-1] if m["role"] == "assistant"]
    assert said == ["message 0", "message 1", "message 2"]
    assert "SECRET PLAN" not in str(prompts[-1])
    assert [t.thought for t in dialog.turns if t.role == "user"][:3] == ["SECRET PLAN 0", "SECRET PLAN 1", "SECRET PLAN 2"]


def test_a_persona_that_plans_can_have_its_thoughts_back():
    _, prompts = play(thoughts=True)
    assert "SECRET PLAN 1" in str(prompts[-1])
