"""``almita-runner``: each test's context goes to the agent under test, with the procedure's
APIs as its tools (their specs only), and its next action is recorded: a reply, or a tool call.
Nothing is executed; the agent answers one turn, as in a replay."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from intellagent.model import StrictModel
from intellagent.steps import Output, Simulator, Statuses
from intellagent_plugins.almita.artefacts import Action, CheckedProcedure, Prediction, TestCase


class RunnerConfig(StrictModel):
    system: Literal["both", "procedure", "environment"] = Field(
        default="both", description="The agent's system prompt: the environment's prompt followed "
        "by the procedure (both), the procedure alone, or the environment's prompt alone (an agent "
        "that must know its procedures already).")


def system_prompt(env_prompt: str, checked: CheckedProcedure, how: str) -> str:
    procedure = checked.procedure
    text = f"## Procedure: {procedure.intent_name}\n\n{procedure.text}"
    if how == "procedure" or not env_prompt.strip():
        return text
    if how == "environment":
        return env_prompt
    return f"{env_prompt.rstrip()}\n\n{text}"


class AlmitaRunner(Simulator):
    """The agent's next action for one test (recorded, never executed)."""

    name = "runner"
    statuses = Statuses(passed=["ok"], failed=["agent-error"])
    Config = RunnerConfig
    inputs = {"test": TestCase, "procedure": CheckedProcedure}
    output = Prediction
    uses_agent = True

    async def run(self, ctx, test: TestCase, procedure: CheckedProcedure) -> Output[Prediction]:
        messages = [{"role": "system", "content": system_prompt(ctx.env.prompt, procedure, self.config.system)}]
        messages += [dict(m) for m in test.context]
        tools = [api.tool() for api in procedure.procedure.apis or []]
        turn = await ctx.agent().step(messages, tools)
        if turn.error:
            prediction = Prediction(action=Action(kind="none"), error=turn.error)
            if turn.infra:  # our own model call failed: not the agent's fault, retried next run
                return Output(value=prediction, status="infra-error", note=turn.error)
            return Output(value=prediction, status="agent-error", note=turn.error)
        if turn.tool_calls:
            call = turn.tool_calls[0]
            try:
                arguments = json.loads(call.arguments) if call.arguments.strip() else {}
            except json.JSONDecodeError:
                arguments = None
            if not isinstance(arguments, dict):
                arguments = {"(not a JSON object)": call.arguments}
            action = Action(kind="api", api=call.name, arguments=arguments, text=turn.content or "")
            return Output(value=Prediction(action=action, calls=len(turn.tool_calls)))
        if turn.content and turn.content.strip():
            return Output(value=Prediction(action=Action(kind="reply", text=turn.content)))
        return Output(value=Prediction(action=Action(kind="none")), note="the agent answered nothing")
