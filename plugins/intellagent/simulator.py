"""``policy-user``: IntellAgent's simulated user, the dialogue kit's ``user-agent`` with the
``policy-tester`` persona (it knows the policies under test and pushes on them) and the
stop-review loop.

When the user stops, a reviewer (the ``critic`` role) checks the stop against the agent's
instructions, the policies with their expected behaviour and the transcript with full tool
results and the database diff so far (the kit sets it before each stop check); if it disagrees, its feedback goes back to the user and the
dialog resumes (bounded by ``max_feedback``). A reviewer that cannot answer makes the dialog an
infra error: a stop is never accepted unchecked. A user that still stops against the reviewer
after the last round leaves the dialog ``stop_disputed``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from intellagent.estimate import tokens
from intellagent.steps import RoleLoad
from intellagent_plugins.dialogue.simulator import PROMPTS as KIT_PROMPTS
from intellagent_plugins.dialogue.simulator import UserAgent, UserConfig, failed_reason
from intellagent_plugins.dialogue.transcript import transcript
from intellagent_plugins.intellagent.artefacts import Event, ReviewedDialog
from intellagent_plugins.intellagent.generator import record_tokens

PROMPTS = Path(__file__).parent / "prompts"


class Config(UserConfig):
    persona: str = Field(default="policy-tester", pattern=r"^[a-z0-9][a-z0-9_-]*$",
                         description="The persona: the prompt file user.PERSONA.md (built in: "
                                     "policy-tester, task-user).")
    stop_check: bool = Field(default=True, description="A reviewer checks the user's decision to "
                             "stop.")
    max_feedback: int = Field(default=2, ge=0, le=20, description="Times the reviewer may send the "
                                                                  "user back into the dialog.")
    transcript_chars: int = Field(default=60000, ge=1000, le=10_000_000, description="Transcript "
                                  "budget of the reviewer (the middle is cut beyond it).")


class StopCheck(BaseModel):
    correct: bool = Field(description="Is the user's stop decision justified by the transcript?")
    feedback: str = Field(default="", description="When not: what the user overlooked.")


class PolicyUser(UserAgent):
    """A simulated user testing the event's policies; a reviewer checks every stop."""

    name = "policy-user"
    Config = Config
    inputs = {"scenario": Event}
    output = ReviewedDialog
    roles = {"user": "plays the simulated user",
             "critic": "checks the user's decision to stop against the transcript"}
    prompt_folders = (PROMPTS, KIT_PROMPTS)
    prompt_names = ("judge.system.md", "stop_check.md")

    def scenario_tokens(self, env) -> float:
        """The brief and what the user knows, the records of about three entities among it, and
        about three policies with their expected behaviour."""
        return 250 + 3 * record_tokens(env) + 3 * 70

    def review_estimate(self, env, transcript_tokens: float) -> dict[str, RoleLoad]:
        """One stop check per dialog, and another for one in three (the reviewer disagreed)."""
        if not self.config.stop_check:
            return {}
        prompt = tokens(self.prompts.source("judge.system.md"), self.prompts.source("stop_check.md"),
                        env.prompt or "") + min(transcript_tokens, self.config.transcript_chars / 4) + 200
        return {"critic": RoleLoad(calls=1 + min(1, self.config.max_feedback) / 3, prompt_tokens=prompt,
                                   completion_tokens=40)}

    def new_dialog(self, scenario: Event) -> ReviewedDialog:
        return ReviewedDialog(id=scenario.id)

    async def review_stop(self, ctx, scenario: Event, dialog: ReviewedDialog) -> str | None:
        if not self.config.stop_check:
            return None
        outcome = await ctx.llm.structured([
            {"role": "system", "content": self.prompts.render("judge.system.md")},
            {"role": "user", "content": self.prompts.render(
                "stop_check.md", agent_prompt=ctx.env.prompt, event=scenario, dialog=dialog,
                transcript=transcript(dialog, self.config.transcript_chars))}],
            StopCheck, role="critic")
        if not outcome.ok:
            dialog.stop_reason, dialog.error = failed_reason(outcome), f"stop check failed: {outcome.error}"
            return None
        if outcome.value.correct:
            return None
        feedback = outcome.value.feedback or "The stop decision does not match the transcript."
        if dialog.feedback_rounds < self.config.max_feedback:
            dialog.feedback_rounds += 1
            return feedback
        dialog.stop_disputed = True
        return None
