"""ALMITA's sampler and generators: paths through each conversation graph (inverse-visit
weighted walk), a conversation written along each path, and the tests cut from it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, Field

from intellagent.bounds import MAX_ITEMS, MAX_ROUNDS
from intellagent.model import StrictModel
from intellagent.steps import Generator, ItemEstimate, Output, Sampler
from intellagent_plugins.almita.artefacts import (Action, Conversation, ConversationGraph,
                                                  ConversationPath, Message, PathStep, Rejection, TestCase)
from intellagent_plugins.almita.extractors import FILTER, FILTERED, GENERATOR_ROLE, PromptsOnly, filtered, infra
from intellagent_plugins.almita.prompts import Prompts
from intellagent_plugins.almita.rules import build_graph, placeholder
from intellagent_plugins.almita.sampling import inverse_visit_paths, uniform_paths

# --- paths ------------------------------------------------------------------------------------


class PathsConfig(StrictModel):
    paths: int = Field(default=5, ge=1, le=MAX_ITEMS, description="Different paths to sample per graph.")
    method: Literal["inverse-visit", "uniform"] = Field(
        default="inverse-visit", description="inverse-visit: a child is drawn with probability "
        "proportional to 1 / (its visits + 1) (ALMITA); uniform: a plain random walk.")
    attempts: int = Field(default=4, ge=1, le=MAX_ROUNDS,
                          description="Walks per wanted path: sampling stops at "
                          "`paths` different paths or `paths × attempts` walks.")


class AlmitaPaths(Sampler):
    """Different root-to-leaf paths of a conversation graph, for conversations to follow."""

    name = "paths"
    version = "2"  # a child drawn first, then one of its edges
    Config = PathsConfig
    inputs = {"graph": ConversationGraph}
    output = list[ConversationPath]

    def estimate(self, env) -> ItemEstimate:
        """``paths`` of each graph (fewer only where a graph has fewer root-to-leaf paths)."""
        return ItemEstimate(outputs=self.config.paths)

    def run(self, ctx, graph: ConversationGraph) -> list[ConversationPath]:
        c: PathsConfig = self.config
        g = build_graph(graph.nodes, graph.edges)
        root = next(n for n in g if g.in_degree(n) == 0)
        rng = ctx.rng("paths", c.method)
        visits: Counter = Counter()  # across the walks of this graph
        seen: list[tuple] = []
        for _ in range(c.paths * c.attempts):
            if c.method == "inverse-visit":
                (path,) = inverse_visit_paths(g, root, 1, rng, visits)
            else:
                (path,) = uniform_paths(g, root, 1, rng)
            key = tuple(path[1])
            if key not in seen:
                seen.append(key)
                if len(seen) == c.paths:
                    break
        out = []
        for i, edges in enumerate(seen):
            steps = [self._step(g, root)]
            for u, v, k in edges:
                if steps[-1].role == "api":  # the output this path took
                    steps[-1].output = g.edges[u, v, k]["text"]
                steps.append(self._step(g, v))
            out.append(ConversationPath(id=f"C{i + 1:02d}", procedure=graph.procedure, steps=steps))
        return out

    @staticmethod
    def _step(g, node: str) -> PathStep:
        data = g.nodes[node]
        return PathStep(node=node, role=data["role"], text=data["text"], api=data.get("api"),
                        noise=data.get("noise"))


# --- conversations ----------------------------------------------------------------------------


class WrittenTurn(BaseModel):
    node: str = Field(description="The path step's node id.")
    text: str = Field(default="", description="An assistant's or user's message.")
    arguments: str = Field(default="", description="For an api step: the arguments as a JSON object.")
    output: str = Field(default="", description="For an api step: the call's concrete output.")


class WrittenConversation(BaseModel):
    turns: list[WrittenTurn]



def check_conversation(path: ConversationPath, turns: list[WrittenTurn]) -> tuple[list[Message], list[Rejection]]:
    """The written turns as messages, and every rule they break: one turn per path step in
    order (``follows-path``), concrete messages and outputs (``concrete-text``), arguments that
    are a JSON object fitting the API's parameters (``api-arguments``)."""
    broken: list[Rejection] = []
    if len(turns) != len(path.steps) or any(t.node != s.node for t, s in zip(turns, path.steps)):
        got = [t.node for t in turns]
        want = [s.node for s in path.steps]
        return [], [Rejection(rule="follows-path", detail=f"turns {got[:12]} do not follow the path {want[:12]}")]
    apis = {a.name: a for a in path.procedure.apis or []}
    messages: list[Message] = []
    for turn, step in zip(turns, path.steps):
        if step.role == "api":
            why = placeholder(turn.output)
            if why and not any(r.rule == "concrete-text" for r in broken):
                broken.append(Rejection(rule="concrete-text", detail=f"output of {step.node}: {why}"))
            arguments, problem = parse_arguments(turn.arguments, apis.get(step.api or ""))
            if problem and not any(r.rule == "api-arguments" for r in broken):
                broken.append(Rejection(rule="api-arguments", detail=f"{step.node} ({step.api}): {problem}"))
            messages.append(Message(role="api", api=step.api, arguments=arguments, output=turn.output.strip(),
                                    noise=step.noise))
        else:
            why = placeholder(turn.text)
            if why and not any(r.rule == "concrete-text" for r in broken):
                broken.append(Rejection(rule="concrete-text", detail=f"{step.node}: {why}"))
            messages.append(Message(role=step.role, text=turn.text.strip(), noise=step.noise))  # type: ignore[arg-type]
    order = ["follows-path", "concrete-text", "api-arguments"]
    return messages, sorted(broken, key=lambda r: order.index(r.rule))


def parse_arguments(text: str, api: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"arguments are not JSON ({exc.msg})"
    if not isinstance(value, dict):
        return None, "arguments are not a JSON object"
    if api is not None:
        errors = sorted(jsonschema.Draft202012Validator(api.parameters).iter_errors(value), key=str)
        if errors:
            return value, f"arguments do not fit the API: {errors[0].message}"
    for name, v in value.items():
        if isinstance(v, str) and placeholder(v):
            return value, f"argument {name} is not concrete ({v!r})"
    return value, None


class AlmitaConversation(Generator):
    """A conversation written along one path, with concrete values for the API arguments and
    outputs; rejected when it leaves the path or its arguments do not fit the API."""

    name = "conversation"
    statuses = FILTERED
    scores = {"almita-filter": FILTER}
    Config = PromptsOnly
    inputs = {"path": ConversationPath}
    output = Conversation
    roles = GENERATOR_ROLE

    def __init__(self, config: PromptsOnly) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "conversation.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    async def run(self, ctx, path: ConversationPath) -> Output[Conversation]:
        outcome = await ctx.llm.structured(
            self.prompts.messages("conversation.md", procedure=path.procedure, steps=path.steps),
            WrittenConversation, role="generator")
        if not outcome.ok:
            return infra(None, outcome)
        messages, broken = check_conversation(path, outcome.value.turns)
        conversation = Conversation(id=path.conversation, procedure=path.procedure, messages=messages,
                                    rejection=broken[0] if broken else None)
        return filtered(conversation, "conversations", broken)


# --- tests ------------------------------------------------------------------------------------

#: Tests cut from a conversation the estimate does not know (4.5 a conversation on the test
#: script's graphs, of one or two APIs): one after each user message and each API output.
TESTS = 5


def action_of(message: Message) -> Action:
    if message.role == "api":
        return Action(kind="api", api=message.api, arguments=message.arguments or {})
    return Action(kind="reply", text=message.text)


def cut_tests(conversation: Conversation) -> list[TestCase]:
    """One test after every user message and every API output that the agent must answer: the
    messages so far as context (API calls as tool calls followed by their outputs), the agent's
    next action as expected output."""
    tests: list[TestCase] = []
    context: list[dict[str, Any]] = []
    calls = 0
    for i, message in enumerate(conversation.messages):
        if i and message.role in ("assistant", "api"):
            previous = conversation.messages[i - 1]
            if previous.role in ("user", "api"):
                procedure = conversation.procedure
                tests.append(TestCase(id=f"T{len(tests) + 1:02d}", conversation=conversation.id,
                                      intent=procedure.intent, procedure=procedure.key,
                                      context=[dict(m) for m in context], expected=action_of(message),
                                      after_noise=previous.role == "user" and previous.noise is not None))
        if message.role == "api":
            calls += 1
            call_id = f"call_{calls}"
            context.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": message.api, "arguments": json.dumps(message.arguments or {})}}]})
            context.append({"role": "tool", "tool_call_id": call_id, "content": message.output or ""})
        else:
            context.append({"role": message.role, "content": message.text})
    for test in tests:  # a conversation is judged whole only when all of them were scored
        test.conversation_tests = len(tests)
    return tests


class AlmitaTests(Generator):
    """The tests of one conversation: cut after each user message and each API output."""

    name = "tests"
    version = "2"  # tests carry their conversation's number of tests
    inputs = {"conversation": Conversation}
    output = list[TestCase]

    def estimate(self, env) -> ItemEstimate:
        """A conversation the estimate does not know: :data:`TESTS` tests (a pilot run measures)."""
        return ItemEstimate(outputs=TESTS, outputs_fixed=False)

    def run(self, ctx, conversation: Conversation) -> list[TestCase]:
        return cut_tests(conversation)
