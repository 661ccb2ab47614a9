"""``user-agent``: an LLM user plays the event against the agent under test.

Each user turn is a private thought, a message, and a decision: continue, or stop with success,
failure (the agent broke a policy) or give-up. When the user stops, a reviewer (the ``critic``
role) checks the stop against the agent's instructions, the policies with their expected
behaviour and the transcript with full tool results and the database diff; if it disagrees, its
feedback goes back to the user and the dialog resumes (bounded). A reviewer that cannot answer
makes the dialog an infra error: a stop is never accepted unchecked. The agent's tools run on
the event's own database; the dialog keeps every message, thought, tool call and result, and the
database diff. The user's closing message never reaches the agent and is marked so.

Personas (prompt files): ``policy-tester`` (IntellAgent: knows the policies under test and pushes
on them) and ``task-user`` (τ-bench: knows only its instruction, reveals it step by step).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from intellagent.conversation import TOOL_CALLS_AS_TEXT, Dialog, LiveSession, ToolBox, Turn, tool_call_in_text
from intellagent.environment import diff_databases
from intellagent.llm.types import Outcome
from intellagent.model import StrictModel
from intellagent.prompts import PromptsFolder
from intellagent.steps import Output, Simulator
from intellagent_plugins.intellagent.artefacts import Event
from intellagent_plugins.intellagent.prompts import Prompts
from intellagent_plugins.intellagent.transcript import transcript

PROMPTS = ("user.policy-tester.md", "user.task-user.md", "judge.system.md", "stop_check.md")


class Config(StrictModel):
    max_turns: int = Field(default=12, ge=1, description="User messages at most.")
    stop_check: bool = Field(default=True, description="A reviewer checks the user's decision to "
                             "stop (off for τ-bench, whose user decides alone).")
    max_feedback: int = Field(default=2, ge=0, description="Times the reviewer may send the user "
                                                           "back into the dialog.")
    max_tool_steps: int = Field(default=10, ge=1, description="Agent tool rounds per user message.")
    persona: Literal["policy-tester", "task-user"] = "policy-tester"
    transcript_chars: int = Field(default=60000, ge=1000, description="Transcript budget of the "
                                  "reviewer (the middle is cut beyond it).")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")
    final_hash: bool = Field(default=False, description="Record the final database's state hash on "
                             "the dialog, for a critic that compares it (τ-bench's tau-state); it "
                             "costs a hash of the database per dialog.")



class UserTurn(BaseModel):
    thought: str = Field(description="Private reasoning, never shown to the agent.")
    message: str = Field(description="What you say to the agent now.")
    stop: Literal["continue", "success", "failure", "give-up"] = Field(
        description="continue; success = the request was handled correctly; failure = the agent "
                    "broke a policy or got it wrong; give-up = you cannot make progress.")
    reason: str = Field(default="", description="Why you stop, when you do.")


class StopCheck(BaseModel):
    correct: bool = Field(description="Is the user's stop decision justified by the transcript?")
    feedback: str = Field(default="", description="When not: what the user overlooked.")


class UserAgentSimulator(Simulator):
    """A simulated user (LLM) in a live dialog with the agent under test."""

    name = "user-agent"
    Config = Config
    inputs = {"event": Event}
    output = Dialog
    roles = {"user": "plays the simulated user",
             "critic": "checks the user's decision to stop against the transcript"}
    uses_agent = True

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, PROMPTS)

    def fingerprint(self) -> dict[str, str]:
        return self.prompts.fingerprint()

    async def run(self, ctx, event: Event) -> Output[Dialog]:
        dialog = await self._run(ctx, event)
        status = "infra-error" if dialog.stop_reason == "infra-error" else "ok"
        return Output(value=dialog, status=status, note=dialog.error or "", warnings=dialog.warnings)

    async def _stop_check(self, ctx, event: Event, dialog: Dialog) -> tuple[bool, str | None]:
        """(answered, feedback): feedback is None when the user's stop is justified."""
        outcome = await ctx.llm.structured([
            {"role": "system", "content": self.prompts.render("judge.system.md")},
            {"role": "user", "content": self.prompts.render(
                "stop_check.md", agent_prompt=ctx.env.prompt, event=event, dialog=dialog,
                transcript=transcript(dialog, self.config.transcript_chars))}],
            StopCheck, role="critic")
        if not outcome.ok:
            return False, outcome.error
        if outcome.value.correct:
            return True, None
        return True, outcome.value.feedback or "The stop decision does not match the transcript."

    async def user_turn(self, ctx, event: Event, view: list[dict[str, Any]]) -> Outcome[UserTurn]:
        """The simulated user's next turn, given its view of the dialog (a subclass may sample
        several and choose)."""
        return await ctx.llm.structured(view, UserTurn, role="user")

    def new_dialog(self, event: Event) -> Dialog:
        return Dialog(id=event.id)

    def finish(self, dialog: Dialog, session: LiveSession) -> None:
        """Called when the dialog ends, with the agent's session (its exact messages)."""

    async def _run(self, ctx, event: Event) -> Dialog:
        db = ctx.database(event.rows)
        initial = db.copy() if db is not None else None
        toolbox = ToolBox(ctx.env, db)
        session = LiveSession(ctx.agent(ground_truth=event.task), toolbox, ctx.env.prompt,
                              max_tool_steps=self.config.max_tool_steps)
        dialog = self.new_dialog(event)
        # the simulator's own view: its messages as "assistant", the agent's as "user"
        persona = self.prompts.render(f"user.{self.config.persona}.md", event=event)
        view: list[dict[str, Any]] = [{"role": "system", "content": persona},
                                      {"role": "user", "content": "(The conversation starts. "
                                                                  "Write your first message.)"}]
        user_turns = 0
        while True:
            if user_turns >= self.config.max_turns:
                dialog.stop_reason = "max-turns"
                break
            outcome = await self.user_turn(ctx, event, view)
            if not outcome.ok:
                dialog.stop_reason, dialog.error = "infra-error", outcome.error
                break
            turn = outcome.value
            if turn.stop != "continue" and user_turns > 0:
                dialog.turns.append(Turn(role="user", content=turn.message or None, thought=turn.thought,
                                         delivered=False))
                dialog.stop_reason, dialog.stop_explanation = turn.stop, turn.reason
                if not self.config.stop_check:
                    break
                answered, feedback = await self._stop_check(ctx, event, dialog)
                if not answered:
                    dialog.stop_reason, dialog.error = "infra-error", f"stop check failed: {feedback}"
                    break
                if feedback is not None and dialog.feedback_rounds < self.config.max_feedback:
                    dialog.feedback_rounds += 1
                    dialog.turns.append(Turn(role="critic", content=feedback))
                    view += [{"role": "assistant", "content": json.dumps(turn.model_dump())},
                             {"role": "user", "content": f"(A reviewer disagrees with stopping "
                                                         f"now: {feedback} Continue the conversation.)"}]
                    continue
                dialog.stop_disputed = feedback is not None
                break
            user_turns += 1
            dialog.turns.append(Turn(role="user", content=turn.message, thought=turn.thought))
            view.append({"role": "assistant", "content": json.dumps(turn.model_dump())})
            reply = await session.respond(turn.message)
            dialog.turns.append(Turn(role="assistant", content=reply.content or None,
                                     tool_calls=reply.tool_calls))
            if TOOL_CALLS_AS_TEXT not in dialog.warnings and tool_call_in_text(reply.content, set(ctx.env.tools)):
                dialog.warnings.append(TOOL_CALLS_AS_TEXT)
            if reply.error:
                dialog.stop_reason = "infra-error" if reply.infra else "agent-error"
                dialog.error = reply.error
                break
            if toolbox.terminal_called:
                dialog.stop_reason = "transfer"
                break
            view.append({"role": "user", "content": reply.content or "(the agent said nothing)"})
        dialog.tool_errors = sum(1 for r in toolbox.records if r.error)
        self.finish(dialog, session)
        if db is not None:
            if self.config.final_hash:
                dialog.final_hash = db.hash()
            dialog.db_diff = diff_databases(initial, db).model_dump(mode="json")
            initial.close()
            db.close()
        return dialog
