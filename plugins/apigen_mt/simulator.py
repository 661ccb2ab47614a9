"""``best-of-n-user``: the simulated human of phase 2, with self-critique.

The dialogue kit's ``user-agent`` loop (the ``task-user`` persona: it knows only its
instruction and reveals it turn by turn), except that each user turn is sampled ``candidates``
times and a judge (role ``user-judge``) picks the candidate that stays closest to the
instruction: no invented facts, not the whole intent at once, not led by the agent into
something the instruction does not ask. A candidate or a judge that cannot answer makes the
dialog an infra error (retried by the next run): a turn is never chosen from fewer candidates
than asked. The dialog is kept with the agent's exact messages and tools, for training export.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_TURNS
from intellagent.estimate import tokens
from intellagent.llm.types import Outcome, Status
from intellagent.session import LiveSession
from intellagent.steps import ItemEstimate, RoleLoad
from intellagent_plugins.dialogue.simulator import SAID, UserAgent, UserConfig, UserTurn

from intellagent_plugins.apigen_mt.artefacts import Trajectory
from intellagent_plugins.apigen_mt.prompts import prompts


class BestOfNConfig(UserConfig):
    final_hash: bool = Field(default=True, description="Record the final database's state hash on "
                             "the trajectory (the state check of phase 2 compares it).")
    max_turns: int = Field(default=20, ge=1, le=MAX_TURNS, description="User messages at most.")
    candidates: int = Field(default=3, ge=1, le=8, description="User replies sampled per turn "
                            "(1: no self-critique).")


def _said(content: str) -> str:
    """The message of one of the user's own turns, as its view keeps it: what it said, or with
    ``thoughts`` the turn's JSON (its thought and message)."""
    try:
        return json.loads(content).get("message", content)
    except (ValueError, AttributeError):
        return content


class Choice(BaseModel):
    best: int = Field(description="The number of the best candidate (1-based).")
    reason: str = ""


class BestOfNUser(UserAgent):
    name = "best-of-n-user"
    Config = BestOfNConfig
    output = Trajectory
    roles = {**UserAgent.roles,
             "user-judge": "picks the simulated user's reply that keeps closest to the instruction"}

    def __init__(self, config: BestOfNConfig) -> None:
        super().__init__(config)
        self.judge_texts = prompts(config.prompts, "user_judge.md")

    def fingerprint(self) -> Any:
        return {**super().fingerprint(), **self.judge_texts.fingerprint()}

    def estimate(self, env: Any) -> ItemEstimate:
        """The dialog of :class:`UserAgent`'s estimate, each user turn sampled ``candidates``
        times and, where they differ, chosen by the judge (the instruction, the conversation so
        far and the candidates)."""
        base = super().estimate(env)
        n = self.config.candidates
        if n == 1:
            return base
        user = base.roles["user"]
        judge = RoleLoad(calls=user.calls, completion_tokens=30, prompt_tokens=tokens(
            self.judge_texts.source("user_judge.md")) + self.scenario_tokens(env) + user.prompt_tokens
            - tokens(self.prompts.source(self.persona_file)) + n * SAID)
        roles = {**base.roles, "user": user.model_copy(update={"calls": user.calls * n}), "user-judge": judge}
        return ItemEstimate(roles=roles, sequential=sum(r.calls for r in roles.values()))

    def new_dialog(self, event) -> Trajectory:
        return Trajectory(id=event.id, candidates=self.config.candidates)

    def finish(self, dialog: Trajectory, session: LiveSession) -> None:
        dialog.messages = list(session.messages)
        dialog.tools = session.toolbox.schemas()

    async def user_turn(self, ctx, event, view: list[dict[str, Any]]) -> Outcome[UserTurn]:
        n = self.config.candidates
        if n == 1:
            return await super().user_turn(ctx, event, view)
        outcomes = []
        for i in range(n):  # each candidate is a draw of its own: a cache never repeats one
            outcomes.append(await ctx.llm.structured(view, UserTurn, role="user", sample=f"candidate-{i}"))
        failed = next((o for o in outcomes if not o.ok), None)
        if failed is not None:  # best of fewer is not best of n: the dialog is retried, not kept
            return failed
        unique = list({o.value.model_dump_json(): o for o in outcomes}.values())
        if len(unique) == 1:
            return unique[0]
        conversation = [{"speaker": "customer", "text": _said(m["content"])} if m["role"] == "assistant"
                        else {"speaker": "agent", "text": m["content"]} for m in view[2:]]
        choice = await ctx.llm.structured([{"role": "user", "content": self.judge_texts.render(
            "user_judge.md", instruction=event.brief, knowledge=event.user_knowledge,
            conversation=conversation, candidates=[o.value for o in unique])}], Choice, role="user-judge")
        if not choice.ok:
            return Outcome(status=choice.status if choice.status is not Status.ok else Status.infra_error,
                           error=f"user judge: {choice.error}")
        return unique[min(max(choice.value.best, 1), len(unique)) - 1]
