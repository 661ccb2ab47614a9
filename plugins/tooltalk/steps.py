"""The ``tooltalk`` pipeline's steps: ToolTalk's conversations, their turn-by-turn replay against
the agent under test, and the matching of its calls to the ground truth.

- sampler ``conversations``: the easy and hard sets of the installed ``nvidia-tooltalk``
  package, or a folder of conversations in ToolTalk's format (e.g. written by
  ``tooltalk-generate``);
- simulator ``replay``: each assistant turn from the ground-truth state, the agent's calls
  executed on the ``tooltalk`` environment's tools;
- critic ``match``: ToolTalk's greedy matching under each tool's equivalence rule, with a
  pluggable text comparator; scores for the metrics (per conversation: success, soft success
  and the counters, labelled with the set). A conversation where the agent crashed is an
  ``agent-error``, counted as a failure.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from intellagent.bounds import MAX_ITEMS, MAX_TURNS
from intellagent.errors import ConfigError, IntellagentError
from intellagent.model import StrictModel
from intellagent.paths import path_option
from intellagent.estimate import tokens
from intellagent.steps import (Critic, ItemEstimate, Output, RoleLoad, Sampler, Score, ScoreSpec, Simulator,
                              Statuses)
from intellagent.yamlio import read_json
from intellagent_plugins.tooltalk.artefacts import Assessment, Conversation, Replay
from intellagent_plugins.tooltalk.comparators import comparator, source_of
from intellagent_plugins.tooltalk.equivalence import TextRule
from intellagent_plugins.tooltalk.executor import World, tool_meta
from intellagent_plugins.tooltalk.replay import ToolChoice, replay, result_text, tool_names, user_data
from intellagent_plugins.tooltalk.scoring import assess

#: A replayed conversation's statuses: an agent crash counts against the agent.
CONVERSATION = Statuses(passed=["pass"], failed=["fail", "agent-error"])

PACKAGE_SETS = ("easy", "hard")
ConversationFolder = path_option("folder", "conversation folder")


class ConversationsConfig(StrictModel):
    sets: list[str] = Field(default_factory=lambda: list(PACKAGE_SETS), description="ToolTalk's "
                            "sets from the installed nvidia-tooltalk package: easy, hard.")
    folder: ConversationFolder = Field(default=None, description="A folder of conversations in "
                                       "ToolTalk's JSON format, instead of the package's sets; its "
                                       "name is their set.")
    names: list[str] | None = Field(default=None, description="Only the conversations with these names.")
    limit: int | None = Field(default=None, ge=1, le=MAX_ITEMS,
                              description="At most this many, in order.")


def read_conversation(path: Path, set_name: str) -> Conversation:
    data = read_json(path)
    if not isinstance(data, dict):
        raise ConfigError(f"not a ToolTalk conversation: expected a JSON object, got a {type(data).__name__}",
                          file=path, line=1)
    try:
        return Conversation.model_validate({**data, "set": set_name})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise ConfigError(f"not a ToolTalk conversation: {where}: {error['msg']}", file=path) from None


class Conversations(Sampler):
    """ToolTalk's conversations, each an item to replay."""

    name = "conversations"
    description = "ToolTalk's easy and hard conversations (or a folder of them)"
    Config = ConversationsConfig
    output = list[Conversation]

    def files(self) -> list[tuple[str, Path]]:
        c: ConversationsConfig = self.config
        if c.folder is not None:
            folder = Path(c.folder)
            return [(folder.resolve().name, p) for p in sorted(folder.glob("*.json"))]
        from intellagent_plugins.tooltalk.environment.data import conversation_files

        unknown = [s for s in c.sets if s not in PACKAGE_SETS]
        if unknown:
            raise ConfigError(f"unknown set '{unknown[0]}' (the package has {', '.join(PACKAGE_SETS)}; "
                              "give `folder` for others)", item="steps.conversations.with.sets")
        return conversation_files(c.sets)

    def label_values(self, env) -> dict[str, list[Any]]:
        """The sets its conversations belong to: those asked for, or the folder's name."""
        c: ConversationsConfig = self.config
        return {"set": [Path(c.folder).resolve().name] if c.folder is not None else list(c.sets)}

    def fingerprint(self) -> Any:
        digest = hashlib.sha256()
        for set_name, path in self.files():
            digest.update(f"{set_name}/{path.name}".encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def run(self, ctx) -> list[Conversation]:
        c: ConversationsConfig = self.config
        read = [(read_conversation(path, set_name), path) for set_name, path in self.files()]
        if c.names is not None:
            missing = sorted(set(c.names) - {x.name for x, _ in read})
            if missing:
                raise ConfigError(f"no conversation named {missing[0]!r}", item="steps.conversations.with.names")
            read = [(x, path) for x, path in read if x.name in set(c.names)]
        if not read:
            raise ConfigError("no conversations to replay", item="steps.conversations")
        read = read[:c.limit] if c.limit else read
        for conversation, path in read:  # bad data is refused before any agent is asked
            world = World(ctx.env, conversation)
            try:
                problem = world.problem()
            except IntellagentError as exc:
                problem = exc.message
            finally:
                world.close()
            if problem:
                raise ConfigError(problem, file=path)
        return [x for x, _ in read]


class ReplayConfig(StrictModel):
    tools: ToolChoice = Field(default="all", description="Tools offered to the agent: all 28, "
                              "those of the conversation's plugins, or only those it uses "
                              "(ToolTalk's api_mode all / suite / exact).")
    max_calls: int = Field(default=20, ge=1, le=MAX_TURNS,
                           description="Calls one assistant turn may make "
                           "before it is cut off.")


class ReplayConversation(Simulator):
    """Each assistant turn from the ground-truth state; the agent's calls executed and kept."""

    name = "replay"
    statuses = Statuses(passed=["ok"], failed=["agent-error"])
    version = "2"  # 2: max_calls exact; missing and unknown arguments fail with ToolTalk's texts
    description = "ToolTalk's turn-by-turn replay against the agent under test"
    Config = ReplayConfig
    inputs = {"conversation": Conversation}
    output = Replay
    uses_agent = True

    def estimate(self, env: Any) -> ItemEstimate | None:
        """The agent's calls for one conversation, averaged over the package's (as
        :meth:`estimate_item`), for an item whose conversation the estimate does not know; None
        without the package or on another environment."""
        from intellagent_plugins.tooltalk.environment.data import conversation_files

        try:
            conversations = [read_conversation(path, name) for name, path in conversation_files(list(PACKAGE_SETS))]
            tool_meta(env)
        except IntellagentError:
            return None
        mean = ItemEstimate.mean([self._replay_estimate(env, c) for c in conversations])
        return mean if mean is not None and mean.roles["agent"].calls else None

    def estimate_item(self, env: Any, conversation: Conversation) -> ItemEstimate | None:  # type: ignore[override]
        """The replay of ``conversation`` (the sets, names and limit the run picks, or a folder's)."""
        try:
            return self._replay_estimate(env, conversation)
        except IntellagentError:  # another environment: the step's default
            return None

    def _replay_estimate(self, env: Any, conversation: Conversation) -> ItemEstimate:
        load = self._agent_load(env, conversation)
        return ItemEstimate(roles={"agent": load}, sequential=load.calls)

    def _agent_load(self, env: Any, conversation: Conversation) -> RoleLoad:
        """The agent's calls for ``conversation`` if it makes the ground truth's, as the
        ``oracle`` reference agent does: in each assistant turn one call per ground-truth call and
        one for its reply, each prompt the environment's prompt with the user's data, the tools
        offered and the conversation so far, as :func:`replay` sends them."""
        schema = {name: tokens(tool.openai_schema()) for name, tool in env.tools.items()}
        fixed = tokens(env.prompt or "", user_data(conversation.metadata)) + sum(
            schema[n] for n in tool_names(env, tool_meta(env), conversation, self.config.tools))
        calls = prompt = completion = history = 0.0
        for turn in conversation.conversation:
            said = tokens(turn.text or "")
            if turn.role == "user":
                history += said
                continue
            for call in (turn.apis or [])[:self.config.max_calls]:
                asked = tokens(call.request.api_name, call.request.parameters or {})
                calls, prompt, completion = calls + 1, prompt + fixed + history, completion + asked
                history += asked + tokens(result_text(call))
            calls, prompt, completion = calls + 1, prompt + fixed + history, completion + said
            history += said
        return RoleLoad(calls=calls, prompt_tokens=prompt / calls if calls else 0.0,
                        completion_tokens=completion / calls if calls else 0.0)

    async def run(self, ctx, conversation: Conversation) -> Output[Replay]:
        world = World(ctx.env, conversation)
        try:
            agent = ctx.agent(ground_truth=conversation.model_dump(mode="json"))
            result, infra = await replay(conversation, world, agent, prompt=ctx.env.prompt,
                                         tools=self.config.tools, max_calls=self.config.max_calls)
        finally:
            world.close()
        if infra is not None:  # its reason kept: a prompt over the model's context is no fault a re-run fixes
            return Output(value=result, status="infra-error", note=f"the agent's model could not answer: {infra}")
        failed = [t for t in result.turns if t.error]
        cut = [t for t in result.turns if t.stopped]
        warnings = [f"cut off after {self.config.max_calls} calls in turn {t.index}" for t in cut]
        if failed:
            return Output(value=result, status="agent-error", warnings=warnings,
                          note=f"the agent failed in {len(failed)} turn(s): {failed[0].error}")
        return Output(value=result, warnings=warnings)


class MatchConfig(StrictModel):
    comparator: str = Field(default="token-sort", description="Text comparator for free-text "
                            "arguments: token-sort, token-set, exact, distilbert-cls, or "
                            "'module:function' (f(prediction, truth) -> 0..1).")
    thresholds: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict, description="Text thresholds (0..1) by 'Tool.field' (e.g. "
        "SendEmail.body: 0.7), over those the tools declare (0.9, or 0.8 for email bodies and "
        "messages); only fields the tools compare as text.")
    corrected: bool = Field(default=False, description="Use the corrected rules for ToolTalk's "
                            "known slips (message receiver checked, weather locations compared "
                            "ignoring case) instead of reproducing its scores exactly.")

    @field_validator("comparator")
    @classmethod
    def _known(cls, value: str) -> str:
        try:
            comparator(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        return value


class MatchCalls(Critic):
    """ToolTalk's greedy matching of every prediction to the ground truth, and its metrics."""

    name = "match"
    statuses = CONVERSATION
    scores = {"conversation": ScoreSpec(statuses=CONVERSATION, labels=["set"]),
              **{name: ScoreSpec(value=True, labels=["set"]) for name in (
                  "predictions", "ground-truth", "matches", "actions", "valid-actions", "bad-actions",
                  "soft-success")}}
    version = "2"  # 2: a conversation where the agent crashed is an agent-error, never a success
    description = "ToolTalk's tool-call equivalence and per-conversation metrics"
    Config = MatchConfig
    inputs = {"replay": Replay, "conversation": Conversation}
    output = Assessment

    def fingerprint(self) -> Any:
        return source_of(self.config.comparator)

    def check(self, env) -> str | None:
        """A threshold on a field that no tool of ``env`` compares as text."""
        meta = tool_meta(env)
        declared = {(tool, name) for tool, m in meta.items()
                    for name, rule in {**m.equivalence.fields, **m.equivalence.corrections}.items()
                    if isinstance(rule, TextRule)}
        for key in self.config.thresholds:
            tool, _, name = key.partition(".")
            if (tool, name) not in declared:
                known = ", ".join(sorted(f"{t}.{n}" for t, n in declared))
                return f"thresholds: no text field '{key}' (text fields: {known})"
        return None

    def run(self, ctx, replay: Replay, conversation: Conversation) -> Output[Assessment]:
        env = ctx.env
        problem = self.check(env)  # the runner checked it already; a step run alone has not
        if problem:
            raise ConfigError(problem, item="thresholds")
        overrides = {tuple(key.split(".", 1)): value for key, value in self.config.thresholds.items()}
        compare = comparator(self.config.comparator)
        actions = {name for name, tool in env.tools.items() if tool.spec.action}
        try:
            result = assess(conversation, replay, tool_meta(env), actions, compare,
                            corrected=self.config.corrected, comparator_name=self.config.comparator,
                            threshold=lambda tool, field, declared: overrides.get((tool, field), declared))
        except IntellagentError:
            raise
        except Exception as exc:  # a user's comparator that fails: its own clear line
            raise ConfigError(f"comparator {self.config.comparator} failed: {type(exc).__name__}: {exc}",
                              item=f"conversation {conversation.name}") from None
        m = result.metrics
        labels = {"set": conversation.set}
        status = "agent-error" if m.agent_error else "pass" if m.success else "fail"
        note = "" if m.success else _why(result)
        scores = [Score(name="conversation", status=status, labels=labels, note=note)]
        for name, value in (("predictions", m.predictions), ("ground-truth", m.ground_truths),
                            ("matches", m.matches), ("actions", m.actions),
                            ("valid-actions", m.valid_actions), ("bad-actions", m.bad_actions),
                            ("soft-success", m.soft_success)):
            scores.append(Score(name=name, value=value, labels=labels))
        return Output(value=result, status=status, scores=scores, note=note)


def _why(result: Assessment) -> str:
    missed = [t.call.request.api_name for t in result.ground_truth if not t.match]
    bad = [p.call.request.api_name for p in result.predictions if p.bad_action]
    parts = [f"the agent failed in {result.agent_error}"] if result.agent_error else []
    if missed:
        parts.append(f"missed {', '.join(missed)}")
    if bad:
        parts.append(f"incorrect actions {', '.join(bad)}")
    return "; ".join(parts)
