"""ToolTalk's scenario generation as a pipeline (``tooltalk-generate``): plugin subsets, scenarios
that must use a given tool, and conversations written from them whose ground-truth calls are
executed on the ``tooltalk`` environment's tools (so their responses are the tools' own) and
checked, with repairs, before they are kept.

- sampler ``plugin-subsets``: every subset of ``size`` plugins × every tool of the subset (as
  ToolTalk enumerates them), shuffled by the run seed, the first ``requests`` kept;
- generator ``scenarios`` (role ``scenario-writer``): scenarios needing the tool, from the
  subset's tool documentation;
- generator ``write-conversation`` (role ``conversation-writer``): a user, a place and a time
  drawn by the seed; the conversation written as exchanges with typed tool calls; every call
  executed in order; failures sent back for repair; the replies then rewritten from the real
  results. A conversation whose calls still fail, or that never calls the tool, is ``invalid``.
"""

from __future__ import annotations

import itertools
import json
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, create_model

from intellagent.bounds import MAX_ITEMS, MAX_ROUNDS, MAX_TURNS
from intellagent.model import StrictModel
from intellagent.prompts import PromptFiles, PromptsFolder
from intellagent.estimate import tokens
from intellagent.steps import DEGRADED, Generator, ItemEstimate, Output, RoleLoad, Sampler, Statuses
from intellagent_plugins.tooltalk.artefacts import ApiCall, Conversation, Turn
from intellagent_plugins.tooltalk.environment.data import PER_USER
from intellagent_plugins.tooltalk.executor import World, tool_meta

PROMPTS = Path(__file__).parent / "prompts"
LOGGED_OUT_TOOLS = ("UserLogin", "RegisterUser", "SendVerificationCode", "ResetPassword")


# -- artefacts ---------------------------------------------------------------------------------

class ScenarioRequest(BaseModel):
    id: str
    plugins: list[str]
    tool: str = Field(description="The tool every scenario must need.")


class Scenario(BaseModel):
    id: str
    plugins: list[str]
    tool: str
    text: str
    tools: list[str] = Field(default_factory=list, description="The tools the writer expected.")


class ScenarioDraft(BaseModel):
    text: str = Field(description="The scenario, from the user's side, in a few sentences.")
    tools: list[str] = Field(description="The tools the assistant is expected to call, in order.")


class ScenarioDrafts(BaseModel):
    scenarios: list[ScenarioDraft] = Field(min_length=1)


class Replies(BaseModel):
    replies: list[str]


# -- prompts -----------------------------------------------------------------------------------

def _prompts(override: str | None, *names: str) -> PromptFiles:
    """The step's Jinja2 templates; a ``prompts:`` folder may replace any of them by name."""
    return PromptFiles(PROMPTS, names, override)


def tool_docs(env, names: list[str]) -> str:
    """The tools as the writers read them: name, description, arguments."""
    out = []
    for name in names:
        spec = env.tools[name].spec
        lines = [f"{name}: {spec.description}"]
        for arg, prop in spec.properties.items():
            kind = prop.get("type")
            kind = "/".join(k for k in kind if k != "null") if isinstance(kind, list) else kind
            need = "required" if arg in spec.required else "optional"
            lines.append(f"  - {arg} ({kind}, {need}): {prop.get('description', '')}")
        lines.append(f"  returns {spec.returns.description}")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def plugin_tools(env) -> dict[str, list[str]]:
    """Plugin → its tools, in the order the environment declares them."""
    out: dict[str, list[str]] = {}
    for name, meta in tool_meta(env).items():
        out.setdefault(meta.plugin, []).append(name)
    return out


# -- typed calls ---------------------------------------------------------------------------------

def _annotation(prop: dict[str, Any]) -> Any:
    kind = prop.get("type", "string")
    kinds = kind if isinstance(kind, list) else [kind]
    base = next((k for k in kinds if k != "null"), "string")
    if "enum" in prop:
        annotation: Any = Literal[tuple(v for v in prop["enum"] if v is not None)]
    else:
        annotation = {"array": list[str], "integer": int, "number": float, "boolean": bool}.get(base, str)
    return annotation | None if "null" in kinds else annotation


def draft_model(env, names: tuple[str, ...]) -> type[BaseModel]:
    """The writer's answer: exchanges whose calls are typed by each tool's arguments."""
    return _draft_model(tuple((n, json.dumps(env.tools[n].spec.parameters, sort_keys=True)) for n in names))


@lru_cache(maxsize=64)
def _draft_model(tools: tuple[tuple[str, str], ...]) -> type[BaseModel]:
    calls = []
    for name, text in tools:
        schema = json.loads(text)
        required = schema.get("required", [])
        fields = {arg: (_annotation(prop), ...) if arg in required else (_annotation(prop), None)
                  for arg, prop in schema.get("properties", {}).items()}
        arguments = create_model(f"{name}Arguments", **fields)
        calls.append(create_model(f"{name}Call", tool=(Literal[name], ...), arguments=(arguments, ...)))
    call = Annotated[Union[tuple(calls)], Field(discriminator="tool")] if len(calls) > 1 else calls[0]
    exchange = create_model("Exchange", user=(str, Field(description="What the user says.")),
                            calls=(list[call], Field(default_factory=list, description="The assistant's "
                                                     "tool calls, in order, before it replies.")),
                            assistant=(str, Field(description="The assistant's reply.")))
    return create_model("ConversationDraft", exchanges=(list[exchange], Field(min_length=1)))


# -- steps ---------------------------------------------------------------------------------------

#: For ``--estimate``: plugins in a request the estimate does not know (ToolTalk used 3), and
#: the tokens a model writes for one scenario and for one conversation's draft (three to six
#: exchanges with their calls).
SUBSET, SCENARIO, DRAFT = 3, 80, 350


def example_request(env) -> ScenarioRequest:
    """A request of the first :data:`SUBSET` plugins for their first tool, for ``--estimate``."""
    groups = plugin_tools(env)
    plugins = list(groups)[:SUBSET]
    return ScenarioRequest(id="estimate", plugins=plugins, tool=groups[plugins[0]][0])

class SubsetsConfig(StrictModel):
    size: int = Field(default=3, ge=1, le=7, description="Plugins per subset (ToolTalk used 3).")
    plugins: list[str] | None = Field(default=None, description="Draw subsets from these plugins only.")
    requests: int | None = Field(default=20, ge=1, le=MAX_ITEMS,
                                 description="How many (subset, tool) pairs to "
                                 "keep, drawn by the seed; none: all of them.")


class PluginSubsets(Sampler):
    """Every subset of plugins with every tool of the subset as the one to use."""

    name = "plugin-subsets"
    description = "ToolTalk's plugin subsets × the tool each scenario must use"
    Config = SubsetsConfig
    output = list[ScenarioRequest]

    def run(self, ctx) -> list[ScenarioRequest]:
        from intellagent.errors import ConfigError

        c: SubsetsConfig = self.config
        groups = plugin_tools(ctx.env)
        chosen = c.plugins if c.plugins is not None else list(groups)
        unknown = [p for p in chosen if p not in groups]
        if unknown:
            raise ConfigError(f"unknown plugin '{unknown[0]}' (plugins: {', '.join(groups)})",
                              item="steps.subsets.with.plugins")
        if c.size > len(chosen):
            raise ConfigError(f"size {c.size} is more than the {len(chosen)} plugins to choose from",
                              item="steps.subsets.with.size")
        requests = [ScenarioRequest(id="-".join(subset) + f"-{tool}", plugins=list(subset), tool=tool)
                    for subset in itertools.combinations([p for p in groups if p in chosen], c.size)
                    for plugin in subset for tool in groups[plugin]]
        ctx.seeded("requests").shuffle(requests)  # the same prefix whatever `requests` is
        return requests[:c.requests] if c.requests else requests


class ScenariosConfig(StrictModel):
    per_request: int = Field(default=2, ge=1, le=MAX_TURNS,
                             description="Scenarios asked for in one prompt.")
    prompts: PromptsFolder = Field(default=None, description="A folder whose files replace the "
                                   "built-in prompts of the same name.")


class WriteScenarios(Generator):
    """Scenarios that need the requested tool, from the subset's tool documentation."""

    name = "scenarios"
    description = "scenarios that must use a given tool"
    Config = ScenariosConfig
    inputs = {"request": ScenarioRequest}
    output = list[Scenario]
    roles = {"scenario-writer": "writes scenarios that need a given tool"}

    def __init__(self, config) -> None:
        super().__init__(config)
        self.prompts = _prompts(config.prompts, "scenarios.md")

    def fingerprint(self) -> Any:
        return self.prompts.fingerprint()

    def estimate(self, env) -> ItemEstimate:
        """A request of the first :data:`SUBSET` plugins, as :meth:`estimate_item`."""
        return self.estimate_item(env, example_request(env))

    def estimate_item(self, env, request: ScenarioRequest) -> ItemEstimate:  # type: ignore[override]
        """One call asking ``per_request`` scenarios, with the request's tool documentation."""
        load = RoleLoad(calls=1, prompt_tokens=tokens(self.prompt(env, request)),
                        completion_tokens=self.config.per_request * SCENARIO)
        return ItemEstimate(roles={"scenario-writer": load}, outputs=self.config.per_request, sequential=1)

    def prompt(self, env, request: ScenarioRequest) -> str:
        groups = plugin_tools(env)
        names = [t for p in request.plugins for t in groups[p]]
        return self.prompts.render("scenarios.md", plugins=request.plugins, tools=tool_docs(env, names),
                                   required=request.tool, count=self.config.per_request)

    async def run(self, ctx, request: ScenarioRequest) -> Output[list[Scenario]]:
        prompt = self.prompt(ctx.env, request)
        outcome = await ctx.llm.structured([{"role": "user", "content": prompt}], ScenarioDrafts,
                                           role="scenario-writer")
        if not outcome.ok:
            return Output(value=[], status=outcome.status.value, note=outcome.error or "")
        scenarios = [Scenario(id=f"{request.id}-{i}", plugins=request.plugins, tool=request.tool,
                              text=d.text, tools=d.tools)
                     for i, d in enumerate(outcome.value.scenarios[:self.config.per_request])]
        return Output(value=scenarios)


class WriteConfig(StrictModel):
    repairs: int = Field(default=2, ge=0, le=MAX_ROUNDS,
                         description="Times a conversation whose calls fail is "
                         "sent back to the writer with the errors.")
    replies: bool = Field(default=True, description="Rewrite the assistant's replies from the "
                          "calls' real results.")
    set_name: str = Field(default="generated", description="The set the conversations belong to.")
    prompts: PromptsFolder = Field(default=None, description="A folder whose files replace the "
                                   "built-in prompts of the same name.")


class WriteConversation(Generator):
    """A conversation from a scenario, its ground-truth calls executed and checked."""

    name = "write-conversation"
    statuses = Statuses(passed=["ok"], other=["invalid"])
    empty_hint = ("a conversation must hold tool calls that run on ToolTalk's tools, which a mock model's "
                  "rarely do: run with a real model (--model gpt-4o)")
    description = "a ToolTalk conversation from a scenario, calls executed on the tools"
    Config = WriteConfig
    inputs = {"scenario": Scenario}
    output = Conversation
    roles = {"conversation-writer": "writes a conversation with tool calls from a scenario"}

    def __init__(self, config) -> None:
        super().__init__(config)
        self.prompts = _prompts(config.prompts, "conversation.md", "repair.md", "replies.md")

    def fingerprint(self) -> Any:
        return self.prompts.fingerprint()

    def label_values(self, env) -> dict[str, list[Any]]:
        """Its conversations' set: the one its options name."""
        return {"set": [self.config.set_name]}

    def setting(self, ctx, scenario: Scenario) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """The user, the metadata and whether the user starts logged in, drawn by the seed."""
        rng = ctx.rng("setting")
        db = ctx.env.seed_database()
        try:
            accounts = db.all("accounts")
            user = dict(rng.choice(accounts))
            days = {r["location"]: sorted(r["days"]) for r in db.all("weather")}
        finally:
            db.close()
        location = rng.choice(sorted(days))
        usable = [d for d in days[location][:-3]]
        day = rng.choice(usable) if usable else days[location][0]
        now = f"{day} {rng.randint(8, 18):02d}:{rng.choice((0, 15, 30, 45)):02d}:00"
        logged_in = "AccountTools" not in scenario.plugins or (
            scenario.tool not in LOGGED_OUT_TOOLS and rng.random() < 0.6)
        user = {k: user.get(k) for k in ("username", "email", "phone", "name", "password")}
        metadata = {"location": location.title(), "timestamp": now}
        if logged_in:
            token = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}"
            user["session_token"] = token
            metadata |= {"session_token": token, "username": user["username"]}
        if scenario.tool == "ResetPassword":
            user["verification_code"] = f"{rng.randint(0, 999999):06d}"
        return user, metadata, logged_in

    def context(self, env, user: dict[str, Any]) -> tuple[str, str, str]:
        """The user's records, the other users, and the weather data, for the writer."""
        db = env.seed_database()
        try:
            mine = {}
            for table, column in PER_USER.values():
                row = db.get(table, user["username"])
                if row and row[column]:
                    mine[column] = list(row[column].values())
            others = [{"username": a["username"], "name": a["name"], "email": a["email"]}
                      for a in db.all("accounts") if a["username"] != user["username"]]
            weather = sorted(r["location"].title() for r in db.all("weather"))
            history = {r["location"].title(): sorted(r["months"]) for r in db.all("historic_weather")}
        finally:
            db.close()
        records = json.dumps(mine, indent=1, ensure_ascii=False)[:8000] if mine else "(nothing yet)"
        people = "Other users: " + json.dumps(others, ensure_ascii=False)
        places = (f"Locations with daily weather: {', '.join(weather)}. Monthly history: "
                  + "; ".join(f"{k} ({', '.join(v)})" for k, v in history.items()) + ".")
        return records, people, places

    def estimate(self, env) -> ItemEstimate:
        """A scenario the estimate does not know (one of the first :data:`SUBSET` plugins, the
        first account): its draft, one repair (the draft and its problems sent back), and the
        replies' rewrite from the calls' results."""
        request = example_request(env)
        db = env.seed_database()
        try:
            user = {k: v for k, v in db.all("accounts")[0].items() if k in ("username", "email", "phone", "name")}
        finally:
            db.close()
        records, people, places = self.context(env, user)
        names = tuple(t for p in request.plugins for t in plugin_tools(env)[p])
        written = tokens(self.prompts.render(
            "conversation.md", scenario="x" * 4 * SCENARIO, required=request.tool, tools=tool_docs(env, list(names)),
            user=json.dumps(user), logged_in=True, location="", now="", records=records,
            weather=f"{people}\n\n{places}"), draft_model(env, names).model_json_schema())
        asked = [(written, DRAFT)]
        if self.config.repairs:
            asked.append((written + DRAFT + tokens(self.prompts.source("repair.md")), DRAFT))
        if self.config.replies:
            asked.append((tokens(self.prompts.source("replies.md")) + 2 * DRAFT, DRAFT / 2))
        load = RoleLoad(calls=len(asked), prompt_tokens=sum(p for p, _ in asked) / len(asked),
                        completion_tokens=sum(o for _, o in asked) / len(asked))
        return ItemEstimate(roles={"conversation-writer": load}, sequential=len(asked))

    async def run(self, ctx, scenario: Scenario) -> Output[Conversation]:
        env = ctx.env
        groups = plugin_tools(env)
        names = tuple(t for p in scenario.plugins for t in groups[p])
        model = draft_model(env, names)
        user, metadata, logged_in = self.setting(ctx, scenario)
        records, people, places = self.context(env, user)
        profile = json.dumps({k: v for k, v in user.items() if k != "session_token"}, ensure_ascii=False)
        prompt = self.prompts.render(
            "conversation.md", scenario=scenario.text, required=scenario.tool, tools=tool_docs(env, list(names)),
            user=profile, logged_in=logged_in, location=metadata["location"], now=metadata["timestamp"],
            records=records, weather=f"{people}\n\n{places}")
        messages = [{"role": "user", "content": prompt}]
        shell = Conversation(name=scenario.id.replace("/", "-"), user=user, metadata=metadata, conversation=[])
        for attempt in range(self.config.repairs + 1):
            outcome = await ctx.llm.structured(messages, model, role="conversation-writer")
            if not outcome.ok:
                return Output(value=shell, status=outcome.status.value, halt=True, note=outcome.error or "")
            draft = outcome.value
            executed, problems = self.execute(env, shell, draft, scenario.tool)
            if not problems:
                break
            if attempt < self.config.repairs:
                messages += [{"role": "assistant", "content": draft.model_dump_json()},
                             {"role": "user", "content": self.prompts.render(
                                 "repair.md", problems="\n".join(f"- {p}" for p in problems),
                                 required=scenario.tool)}]
        else:
            return Output(value=shell, status="invalid", halt=True, note="; ".join(problems)[:1000])
        replies = [e.assistant for e in draft.exchanges]
        warnings, failed = [], False
        if self.config.replies:
            replies, warning, failed = await self.rewrite_replies(ctx, draft, executed, replies)
            warnings += [warning] if warning else []
        turns: list[Turn] = []
        for i, (exchange, calls, reply) in enumerate(zip(draft.exchanges, executed, replies)):
            turns.append(Turn(index=2 * i, role="user", text=exchange.user))
            turns.append(Turn(index=2 * i + 1, role="assistant", text=reply, apis=calls) if calls
                         else Turn(index=2 * i + 1, role="assistant", text=reply))
        used = sorted({c.request.api_name for calls in executed for c in calls})
        conversation = Conversation(
            name=shell.name, conversation_id=str(uuid.UUID(int=ctx.rng("id").getrandbits(128))),
            set=self.config.set_name, suites_used=scenario.plugins, apis_used=used, scenario=scenario.text,
            user=user, metadata=metadata, conversation=turns)
        if failed:  # the rewrite's call failed: usable as written, but the next run asks again
            return Output(value=conversation, status=DEGRADED, note=warnings[0], warnings=warnings)
        return Output(value=conversation, warnings=warnings)

    def execute(self, env, shell: Conversation, draft: BaseModel, required: str
                ) -> tuple[list[list[ApiCall]], list[str]]:
        """Every call of the draft run in order from the conversation's start; what went wrong."""
        world = World(env, shell)
        db = world.fresh()
        executed: list[list[ApiCall]] = []
        problems = []
        try:
            for i, exchange in enumerate(draft.exchanges):
                calls = []
                for j, call in enumerate(exchange.calls):
                    arguments = {k: v for k, v in call.arguments.model_dump().items() if v is not None}
                    result = world.execute(db, call.tool, arguments)
                    calls.append(result)
                    if result.exception is not None:
                        problems.append(f"exchange {i + 1}, call {j + 1}: {call.tool}"
                                        f"({json.dumps(arguments, ensure_ascii=False)}) failed: {result.exception}")
                executed.append(calls)
        finally:
            db.close()
            world.close()
        if not any(c.request.api_name == required for calls in executed for c in calls):
            problems.append(f"{required} is never called")
        return executed, problems

    async def rewrite_replies(self, ctx, draft: BaseModel, executed: list[list[ApiCall]],
                              replies: list[str]) -> tuple[list[str], str | None, bool]:
        """The replies rewritten from the real results; why they were kept as written, if they
        were; and whether that is because the call failed (the item is then degraded)."""
        lines = []
        for exchange, calls in zip(draft.exchanges, executed):
            lines.append(f"User: {exchange.user}")
            for c in calls:
                params = {k: v for k, v in (c.request.parameters or {}).items() if k != "session_token"}
                lines.append(f"Call: {c.request.api_name}({json.dumps(params, ensure_ascii=False)}) → "
                             f"{json.dumps(c.response, ensure_ascii=False)[:1500]}")
            lines.append(f"Assistant: {exchange.assistant}")
        prompt = self.prompts.render("replies.md", transcript="\n".join(lines), count=len(replies))
        outcome = await ctx.llm.structured([{"role": "user", "content": prompt}], Replies,
                                           role="conversation-writer")
        if not outcome.ok:
            return replies, f"replies kept as written: {outcome.error}", True
        if len(outcome.value.replies) != len(replies):
            return replies, (f"replies kept as written: the rewrite gave {len(outcome.value.replies)} "
                             f"for {len(replies)} exchanges"), False
        return outcome.value.replies, None, False
