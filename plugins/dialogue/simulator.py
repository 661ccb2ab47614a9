"""``user-agent``: a simulated user (an LLM) plays any :class:`Scenario` against the agent under
test.

Each user turn is a private thought, a message and a decision: continue, or stop with success,
failure or give-up. The agent's tools run on the scenario's own database (the environment's seed
data with the scenario's rows on top); the dialog keeps every message, thought, tool call and
result, and the database diff. The user's closing message never reaches the agent and is marked
so. A terminal tool (a hand-off to a human) ends the dialog as ``transfer``; the agent's own
failure as ``agent-error``; a model of ours that cannot answer as ``infra-error``.

Personas are prompt files, ``user.NAME.md``, rendered with the ``scenario``: the kit ships
``task-user`` (knows only its brief, reveals it step by step); a pipeline ships its own beside
its steps, and a user's ``prompts:`` folder can add or replace any. Subclasses refine the loop
through its hooks: :meth:`UserAgent.user_turn` (e.g. sample several and choose),
:meth:`UserAgent.review_stop` (a reviewer that can send the user back into the dialog),
:meth:`UserAgent.new_dialog` and :meth:`UserAgent.finish` (a richer dialog type).
"""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_TURNS
from intellagent.environment import DbDiff, diff_databases
from intellagent.estimate import tokens
from intellagent.llm.types import Outcome, Status
from intellagent.model import StrictModel
from intellagent.prompts import PromptFiles, PromptsFolder
from intellagent.session import TOOL_CALLS_AS_TEXT, LiveSession, ToolBox, tool_call_in_text
from intellagent.replay import DEPARTED, FOLLOWED, REPLAY_SCORE
from intellagent.steps import UNFINISHED, ItemEstimate, Output, RoleLoad, Score, ScoreSpec, Simulator, Statuses
from intellagent_plugins.dialogue.dialog import Dialog, Turn
from intellagent_plugins.dialogue.replay import Script
from intellagent_plugins.dialogue.scenario import Scenario

PROMPTS = Path(__file__).parent / "prompts"

#: What a dialog's estimate assumes (a finished run of the pipeline replaces it with its own):
TURNS = 4  # user messages in a dialog
TOOL_ROUNDS = 1.0  # tool rounds of the agent per user message, when the environment has tools
SAID, REPLY, TOOL_ROUND = 40, 80, 150  # tokens of a user message, of an agent reply, of a tool call
#                                        with its result
SCENARIO = 300  # tokens of a scenario as a persona prompt shows it


def failed_reason(outcome: Outcome) -> str:
    """A dialog's stop reason when a model of ours failed: ``invalid-output`` when its answer did
    not fit, else ``infra-error``; neither counts against the agent."""
    return "invalid-output" if outcome.status is Status.invalid_output else "infra-error"

class UserConfig(StrictModel):
    max_turns: int = Field(default=12, ge=1, le=MAX_TURNS, description="User messages at most.")
    max_tool_steps: int = Field(default=10, ge=1, le=100, description="Agent tool rounds per user "
                                                                      "message.")
    persona: str = Field(default="task-user", pattern=r"^[a-z0-9][a-z0-9_-]*$",
                         description="The persona: the prompt file user.PERSONA.md (built in: "
                                     "task-user; a pipeline may ship more).")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing or "
                                   "adding to the built-in ones of the same name.")
    final_hash: bool = Field(default=False, description="Record the final database's state hash on "
                             "the dialog, for a critic that compares it (state-check); it costs a "
                             "hash of the database per dialog.")
    thoughts: bool = Field(default=False, description="Resend the user's earlier private thoughts "
                           "with its messages (for a persona that plans across turns); by default "
                           "its view holds only what was said, which keeps each prompt short and "
                           "a prefix of the next one (the provider's prompt cache).")


class UserTurn(BaseModel):
    thought: str = Field(description="Private reasoning, never shown to the agent.")
    message: str = Field(description="What you say to the agent now.")
    stop: Literal["continue", "success", "failure", "give-up"] = Field(
        description="continue; success = the request was handled correctly; failure = the agent "
                    "broke a policy or got it wrong; give-up = you cannot make progress.")
    reason: str = Field(default="", description="Why you stop, when you do.")


class Conversation:
    """One dialog in progress: the scenario's database before and now, the tools on it, the
    agent's session, and the simulated user's own view."""

    def __init__(self, ctx: Any, scenario: Scenario, max_tool_steps: int) -> None:
        # a lent copy of the seed (see Environment.lent_database), given back by close()
        self._lent = contextlib.ExitStack()
        self.db = self._lent.enter_context(ctx.lent_database(scenario.rows))
        # the database as the dialog found it is made again for a diff, not kept: a copy held
        # by each dialog in flight doubled a run's event databases (0.7 MB each for airline)
        self._initial = functools.partial(ctx.lent_database, scenario.rows)
        try:
            self._start = self.db.versions() if self.db is not None else None
            self.toolbox = ToolBox(ctx.env, self.db, offload=ctx.offload, observe=ctx.observe)
            self.session = LiveSession(ctx.agent(ground_truth=scenario.ground_truth), self.toolbox,
                                       ctx.env.prompt, max_tool_steps=max_tool_steps)
        except BaseException:
            self._lent.close()
            raise
        self._own_tools = self.session.runs_own_tools

    def diff(self) -> dict[str, Any] | None:
        """The database changes so far (initial → now), as JSON."""
        if self.db is None:
            return None
        if self.db.versions() == self._start:  # nothing written since it began: no need for it
            return DbDiff().model_dump(mode="json")
        with self._initial() as initial:
            initial.take_versions(self._start)
            return diff_databases(initial, self.db).model_dump(mode="json")

    def tool_errors(self) -> int:
        """Tool calls refused or crashed so far."""
        return sum(1 for r in self.toolbox.records if r.error)

    def close(self) -> None:
        """The dialog is over: its database is given back to be lent again, unless a tool call
        may still use it (one that did not return in time, one left running when the dialog was
        cancelled, or one made through an agent's own endpoint): it is closed instead, as soon
        as such a call's transaction ends."""
        self.session.close()
        box = self.toolbox
        if self.db is not None and (box.hung or box.abandoned or self._own_tools):
            self.db.close()
        self.db = None
        self._lent.close()


class UserAgent(Simulator):
    """A simulated user (LLM) in a live dialog with the agent under test, for any scenario.

    The user's view grows by appending only: its persona (the system message), then the
    conversation with the roles flipped (its own messages as ``assistant``, the agent's as
    ``user``), so every call's prompt is the previous one plus the new turn."""

    name = "user-agent"
    version = "2"  # the view holds what the user said, not its earlier thoughts
    Config = UserConfig
    inputs = {"scenario": Scenario}
    output = Dialog
    roles = {"user": "plays the simulated user"}
    uses_agent = True
    replays = True  # intellagent replay: the recorded user's turns while the agent follows them
    scores = {REPLAY_SCORE: ScoreSpec(statuses=Statuses(other=[FOLLOWED, DEPARTED]), value=True,
                                      description="in a replay: followed the recording to its end, or "
                                                  "departed from it at the agent's turn given")}
    #: Folders of built-in prompt files, a subclass's own first.
    prompt_folders: ClassVar[tuple[Path, ...]] = (PROMPTS,)
    #: Other prompt files a subclass renders (their text is part of the items' keys).
    prompt_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: UserConfig) -> None:
        super().__init__(config)
        self.prompts = PromptFiles(self.prompt_folders, (self.persona_file, *self.prompt_names),
                                   config.prompts, also=("user.*.md",))  # the other personas

    @property
    def persona_file(self) -> str:
        return f"user.{self.config.persona}.md"

    def check(self, env: Any) -> str | None:
        if not self.prompts.has(self.persona_file):
            return f"no persona '{self.config.persona}': no prompt file {self.persona_file} " \
                   "(put it in the step's prompts: folder)"
        return None

    def fingerprint(self) -> dict[str, str]:
        return self.prompts.fingerprint()

    def estimate(self, env: Any) -> ItemEstimate:
        """A dialog of :data:`TURNS` user messages (at most ``max_turns``) and its closing one;
        the agent answers each after :data:`TOOL_ROUNDS` tool rounds. Every call's prompt holds
        the dialog so far (the user's view, the agent's messages with its tools)."""
        turns = min(self.config.max_turns, TURNS)
        rounds = min(self.config.max_tool_steps, TOOL_ROUNDS) if env.tools else 0.0
        persona = tokens(self.prompts.source(self.persona_file)) + self.scenario_tokens(env)
        user = RoleLoad(calls=turns + 1, prompt_tokens=persona + turns / 2 * (SAID + REPLY),
                        completion_tokens=SAID + 40)
        exchange = SAID + REPLY + rounds * TOOL_ROUND
        schemas = [t.openai_schema() for t in env.tools.values()]
        agent = RoleLoad(calls=turns * (1 + rounds),
                         prompt_tokens=tokens(env.prompt or "", schemas) + (turns - 1) / 2 * exchange
                         + SAID + rounds / 2 * TOOL_ROUND,
                         completion_tokens=(REPLY + rounds * 40) / (1 + rounds))
        roles = {"user": user, "agent": agent, **self.review_estimate(env, turns * exchange)}
        return ItemEstimate(roles=roles, sequential=sum(r.calls for r in roles.values()))

    def scenario_tokens(self, env: Any) -> float:
        """Tokens of a scenario as the persona prompt shows it (for the estimate)."""
        return SCENARIO

    def review_estimate(self, env: Any, transcript_tokens: float) -> dict[str, RoleLoad]:
        """The calls of :meth:`review_stop` per dialog, by role (none by default)."""
        return {}

    async def run(self, ctx, scenario: Scenario) -> Output[Dialog]:
        dialog = await self.play(ctx, scenario)
        status = dialog.stop_reason if dialog.stop_reason in UNFINISHED else "ok"
        scores = []
        if dialog.replay is not None:  # how far the agent followed the recording
            departed = dialog.replay.departed
            scores.append(Score(name=REPLAY_SCORE, status=FOLLOWED if departed is None else DEPARTED,
                                value=departed, note=dialog.replay.why))
            if departed is None:  # the recorded dialog itself, kept as it was: the steps after it
                dialog.replay = None  # reuse the recorded items (its verdict, no judge asked again)
        return Output(value=dialog, status=status, note=dialog.error or "", warnings=dialog.warnings,
                      scores=scores)

    # -- hooks for subclasses ------------------------------------------------------------------

    def persona(self, scenario: Scenario) -> str:
        """The simulated user's system prompt."""
        return self.prompts.render(self.persona_file, scenario=scenario)

    async def user_turn(self, ctx, scenario: Scenario, view: list[dict[str, Any]]) -> Outcome[UserTurn]:
        """The simulated user's next turn, given its view of the dialog (a subclass may sample
        several and choose)."""
        return await ctx.llm.structured(view, UserTurn, role="user")

    async def review_stop(self, ctx, scenario: Scenario, dialog: Dialog) -> str | None:
        """Called when the user stops (``dialog`` holds the stop, the turns with every tool result,
        and ``db_diff``, the database changes so far): feedback that sends the user back into the
        dialog, or None to accept the stop. A reviewer that cannot answer sets
        ``dialog.stop_reason`` to ``failed_reason(outcome)`` (``infra-error``, or
        ``invalid-output``) and returns None. Accepts every stop by default."""
        return None

    def said(self, turn: UserTurn) -> str:
        """The user's turn as its own view keeps it: what it said (and its thought, with
        ``thoughts``)."""
        if self.config.thoughts:
            return json.dumps({"thought": turn.thought, "message": turn.message}, ensure_ascii=False)
        return turn.message

    def new_dialog(self, scenario: Scenario) -> Dialog:
        return Dialog(id=scenario.id)

    def finish(self, dialog: Dialog, session: LiveSession) -> None:
        """Called when the dialog ends, with the agent's session (its exact messages)."""

    # -- the loop ------------------------------------------------------------------------------

    async def play(self, ctx, scenario: Scenario) -> Dialog:
        """The whole dialog of ``scenario`` (in a replay, its recording played again as far as
        the agent follows it)."""
        talk = Conversation(ctx, scenario, self.config.max_tool_steps)
        recorded = getattr(ctx, "recorded", None)
        script = Script(recorded.value, recorded.run_id, recorded.same_text) \
            if recorded is not None and isinstance(recorded.value, Dialog) else None
        try:
            dialog = await self._loop(ctx, scenario, talk, script)
            if script is not None:
                script.finish(dialog)
            talk.session.close()  # an agent calling tools itself: none after the dialog ends
            dialog.tool_errors = talk.tool_errors()
            self.finish(dialog, talk.session)
            if talk.db is not None:
                if self.config.final_hash:
                    dialog.final_hash = talk.db.hash()
                dialog.db_diff = talk.diff()
            return dialog
        finally:
            talk.close()

    async def _next_user_turn(self, ctx, scenario: Scenario, view: list[dict[str, Any]],
                              script: Script | None) -> Outcome[UserTurn]:
        """The recorded user's turn while a replayed agent follows its recording, else the
        simulated user's (:meth:`user_turn`)."""
        recorded = script.user_turn() if script is not None else None
        if recorded is None:
            return await self.user_turn(ctx, scenario, view)
        stop, reason = ("continue", "") if recorded.delivered else script.stop()
        return Outcome(status=Status.ok, value=UserTurn(thought=recorded.thought or "",
                                                        message=recorded.content or "", stop=stop,
                                                        reason=reason))

    async def _review(self, ctx, scenario: Scenario, dialog: Dialog, script: Script | None) -> str | None:
        """The recorded review of a stop while a replayed agent follows, else :meth:`review_stop`."""
        if script is not None and script.following:
            known, feedback = script.review()
            if known:
                return feedback
        return await self.review_stop(ctx, scenario, dialog)

    async def _loop(self, ctx, scenario: Scenario, talk: Conversation, script: Script | None = None) -> Dialog:
        dialog = self.new_dialog(scenario)
        tools = set(ctx.env.tools)
        # the simulated user's own view: its messages as "assistant", the agent's as "user"
        view: list[dict[str, Any]] = [{"role": "system", "content": self.persona(scenario)},
                                      {"role": "user", "content": "(The conversation starts. "
                                                                  "Write your first message.)"}]
        user_turns = 0
        while True:
            if user_turns >= self.config.max_turns:
                dialog.stop_reason = "max-turns"
                return dialog
            outcome = await self._next_user_turn(ctx, scenario, view, script)
            if not outcome.ok:
                dialog.stop_reason, dialog.error = failed_reason(outcome), outcome.error
                return dialog
            turn = outcome.value
            if turn.stop != "continue" and user_turns > 0:
                dialog.turns.append(Turn(role="user", content=turn.message or None, thought=turn.thought,
                                         delivered=False))
                dialog.stop_reason, dialog.stop_explanation = turn.stop, turn.reason
                # the reviewer judges what the tools did so far, not an empty diff
                dialog.db_diff = talk.diff()
                dialog.tool_errors = talk.tool_errors()
                feedback = await self._review(ctx, scenario, dialog, script)
                if feedback is None:
                    return dialog
                dialog.turns.append(Turn(role="critic", content=feedback))
                view += [{"role": "assistant", "content": self.said(turn)},
                         {"role": "user", "content": f"(A reviewer disagrees with stopping now: "
                                                     f"{feedback} Continue the conversation.)"}]
                continue
            user_turns += 1
            dialog.turns.append(Turn(role="user", content=turn.message, thought=turn.thought))
            view.append({"role": "assistant", "content": self.said(turn)})
            reply = await talk.session.respond(turn.message)
            if script is not None:
                script.agent_reply(reply)
            dialog.turns.append(Turn(role="assistant", content=reply.content or None,
                                     tool_calls=reply.tool_calls))
            if TOOL_CALLS_AS_TEXT not in dialog.warnings and tool_call_in_text(reply.content, tools):
                dialog.warnings.append(TOOL_CALLS_AS_TEXT)
            if reply.error:
                dialog.stop_reason = "infra-error" if reply.infra else "agent-error"
                dialog.error = reply.error
                return dialog
            if talk.toolbox.terminal_called:
                dialog.stop_reason = "transfer"
                return dialog
            view.append({"role": "user", "content": reply.content or "(the agent said nothing)"})
