"""ALMITA's extractor chain: intents → procedures → APIs → flowgraph → conversation graph →
noise. Each step that generates something also filters it: a procedure whose APIs break a rule,
a graph that breaks a graph rule, ends with status ``rejected`` and the rule in its note and in
an ``almita-filter`` score, so the funnel can say what removed what."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from intellagent.bounds import MAX_ITEMS, MAX_TURNS
from intellagent.model import StrictModel
from intellagent.paths import path_option
from intellagent.prompts import PromptsFolder
from intellagent.estimate import tokens
from intellagent.steps import Extractor, ItemEstimate, Output, RoleLoad, Score, ScoreSpec, Statuses
from intellagent_plugins.almita.apis import ApiList, api_from_draft, check_apis
from intellagent_plugins.almita.artefacts import (Api, CheckedProcedure, ConversationGraph,
                                                  ConversationNode, FlowNode, Flowgraph, GraphEdge,
                                                  Intent, Procedure, Rejection)
from intellagent_plugins.almita.examples import EXAMPLE_FLOWGRAPH, EXAMPLE_GRAPH, graph_json
from intellagent_plugins.almita.noise import NoisePoint, insert_noise
from intellagent_plugins.almita.prompts import Prompts
from intellagent_plugins.almita.rules import check_conversation_graph, check_flowgraph
from intellagent_plugins.almita.sources import files_digest, read_intents, read_procedures, slug

IntentsFile = path_option("file", "intents file")
ProceduresFolder = path_option("folder", "procedures folder")
#: Tokens, for ``--estimate``: the response schema instructor sends, and what the model writes
#: for one intent, one procedure, and a procedure's APIs.
SCHEMA, INTENT, PROCEDURE, APIS = 150, 40, 250, 300

GENERATOR_ROLE = {"generator": "writes ALMITA's intents, procedures, APIs, graphs and conversations"}

#: What the funnel records of each generated artefact.
FILTER = ScoreSpec(statuses=Statuses(passed=["kept"], failed=["rejected"]), labels=["stage", "rule"],
                   description="kept, or removed by a rule")
FILTERED = Statuses(passed=["ok"], other=["rejected"])


def filtered(value: Any, stage: str, broken: list[Rejection]) -> Output:
    """A generated artefact through the funnel: kept, or removed by the first rule it breaks
    (the others named in the note). Its score is the funnel's record of it."""
    rejection = broken[0] if broken else None
    score = Score(name="almita-filter", status="rejected" if rejection else "kept",
                  labels={"stage": stage, "rule": rejection.rule if rejection else "kept"},
                  note=rejection.detail if rejection else "")
    if rejection is None:
        return Output(value=value, scores=[score])
    note = rejection.note() + (f" (also: {', '.join(r.rule for r in broken[1:])})" if len(broken) > 1 else "")
    return Output(value=value, status="rejected", halt=True, note=note, scores=[score])


def infra(value, outcome) -> Output:
    return Output(value=value, status=outcome.status.value, note=outcome.error or "")


def environment_apis(env) -> dict[str, Api]:
    """The environment's tools as APIs (specs only)."""
    return {s.name: Api(name=s.name, description=s.description, parameters=s.parameters,
                        output=s.returns.description or s.returns.type) for s in env.tool_specs}


def domain_of(env, domain: str | None) -> str:
    if domain:
        return domain
    text = (env.description or "").strip()
    prompt = (env.prompt or "").strip()
    return (text + "\n\n" + prompt[:6000]).strip() or env.name


# --- intents ----------------------------------------------------------------------------------


class IntentDraft(BaseModel):
    name: str = Field(description="A short name, e.g. 'order not received'.")
    description: str


class IntentList(BaseModel):
    intents: list[IntentDraft] = Field(min_length=1)


class IntentsConfig(StrictModel):
    intents_file: IntentsFile = Field(default=None, description="A file listing the intents (one "
                                      "a line, or a YAML/JSON list); only these are tested.")
    procedures: ProceduresFolder = Field(default=None, description="A folder of procedure Markdown "
                                         "files (front matter: intent, apis); default: the "
                                         "environment's procedures/ folder, if it has one.")
    environment_procedures: bool = Field(default=True, description="Use the environment's "
                                         "procedures/ folder when no folder is given.")
    count: int = Field(default=10, ge=1, le=MAX_ITEMS,
                       description="Intents to generate when none are given.")
    domain: str | None = Field(default=None, description="The domain to generate intents and "
                               "procedures for; default: the environment's description and prompt.")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")


class AlmitaIntents(Extractor):
    """The intents to test: read from ``intents_file``, from a folder of procedures (with their
    procedures), or generated for the domain."""

    name = "intents"
    Config = IntentsConfig
    output = list[Intent]
    roles = GENERATOR_ROLE

    def __init__(self, config: IntentsConfig) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "intents.md"))

    def fingerprint(self):
        return [files_digest(self.config.intents_file, self.config.procedures), self.prompts.fingerprint()]

    def procedures_folder(self, env) -> Path | None:
        if self.config.procedures:
            return Path(self.config.procedures)
        folder = env.path / "procedures"
        return folder if self.config.environment_procedures and folder.is_dir() else None

    def estimate_item(self, env) -> ItemEstimate:
        """Nothing to ask when the intents are read (a file, or a folder of procedures: the
        estimate reads them, and counts them); else one call writing ``count`` of them."""
        c: IntentsConfig = self.config
        if c.intents_file or self.procedures_folder(env):
            return ItemEstimate()
        asked = self.prompts.messages("intents.md", domain=domain_of(env, c.domain), count=c.count)
        return ItemEstimate(roles={"generator": RoleLoad(calls=1, prompt_tokens=tokens(asked) + SCHEMA,
                                                         completion_tokens=c.count * INTENT)},
                            outputs=c.count, sequential=1)

    async def run(self, ctx) -> Output[list[Intent]]:
        c: IntentsConfig = self.config
        folder = self.procedures_folder(ctx.env)
        given = {i.id: i for i in read_procedures(folder, environment_apis(ctx.env))} if folder else {}
        if c.intents_file:
            intents = read_intents(c.intents_file)
            return Output(value=[given.get(i.id, i) for i in intents])
        if given:
            return Output(value=list(given.values()))
        outcome = await ctx.llm.structured(
            self.prompts.messages("intents.md", domain=domain_of(ctx.env, c.domain), count=c.count),
            IntentList, role="generator")
        if not outcome.ok:
            return infra([], outcome)
        intents: dict[str, Intent] = {}
        for draft in outcome.value.intents:
            ident = base = slug(draft.name)
            n = 2
            while ident in intents:
                ident, n = f"{base}-{n}", n + 1
            intents[ident] = Intent(id=ident, name=draft.name.strip(), description=draft.description)
        return Output(value=list(intents.values())[:c.count])


# --- procedures -------------------------------------------------------------------------------


class ProcedureDraft(BaseModel):
    text: str = Field(description="The procedure as numbered, conditional steps.")


class ProcedureList(BaseModel):
    procedures: list[ProcedureDraft] = Field(min_length=1)


class ProceduresConfig(StrictModel):
    per_intent: int = Field(default=2, ge=1, le=MAX_TURNS,
                            description="Procedures to generate per intent (the "
                            "paper: 2); given procedures are used as they are.")
    domain: str | None = None
    prompts: PromptsFolder = None


class AlmitaProcedures(Extractor):
    """An intent's procedures: the given ones, or ``per_intent`` written by the model."""

    name = "procedures"
    Config = ProceduresConfig
    inputs = {"intent": Intent}
    output = list[Procedure]
    roles = GENERATOR_ROLE

    def __init__(self, config: ProceduresConfig) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "procedures.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    def estimate(self, env) -> ItemEstimate:
        """An intent the estimate does not know: one call writing ``per_intent`` procedures."""
        return self.estimate_item(env, Intent(id="intent", name="an intent"))

    def estimate_item(self, env, intent: Intent) -> ItemEstimate:  # type: ignore[override]
        """Nothing to ask for an intent given with its procedures; else one call writing
        ``per_intent`` of them."""
        if intent.procedures:
            return ItemEstimate(outputs=len(intent.procedures))
        c: ProceduresConfig = self.config
        asked = self.prompts.messages("procedures.md", domain=domain_of(env, c.domain), intent=intent,
                                      count=c.per_intent)
        return ItemEstimate(roles={"generator": RoleLoad(calls=1, prompt_tokens=tokens(asked) + SCHEMA,
                                                         completion_tokens=c.per_intent * PROCEDURE)},
                            outputs=c.per_intent, sequential=1)

    async def run(self, ctx, intent: Intent) -> Output[list[Procedure]]:
        if intent.procedures:
            return Output(value=intent.procedures)
        c: ProceduresConfig = self.config
        outcome = await ctx.llm.structured(
            self.prompts.messages("procedures.md", domain=domain_of(ctx.env, c.domain), intent=intent,
                                  count=c.per_intent), ProcedureList, role="generator")
        if not outcome.ok:
            return infra([], outcome)
        drafts = [d for d in outcome.value.procedures if d.text.strip()][:c.per_intent]
        return Output(value=[Procedure(id=f"P{i + 1}", intent=intent.id, intent_name=intent.name,
                                       text=d.text.strip()) for i, d in enumerate(drafts)])


# --- APIs -------------------------------------------------------------------------------------


class PromptsOnly(StrictModel):
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")


class AlmitaApis(Extractor):
    """The APIs a procedure needs (given with it, or extracted by the model), checked: a
    procedure whose APIs are not valid definitions is rejected with the rule."""

    name = "apis"
    statuses = FILTERED
    scores = {"almita-filter": FILTER}
    Config = PromptsOnly
    inputs = {"procedure": Procedure}
    output = CheckedProcedure
    roles = GENERATOR_ROLE

    def __init__(self, config: PromptsOnly) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "apis.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    def estimate_item(self, env, procedure: Procedure) -> ItemEstimate:  # type: ignore[override]
        """Nothing to ask for a procedure given with its APIs; else one call extracting them."""
        if procedure.apis is not None:
            return ItemEstimate()
        asked = self.prompts.messages("apis.md", procedure=procedure)
        return ItemEstimate(roles={"generator": RoleLoad(calls=1, prompt_tokens=tokens(asked) + SCHEMA,
                                                         completion_tokens=APIS)}, sequential=1)

    async def run(self, ctx, procedure: Procedure) -> Output[CheckedProcedure]:
        drafts = None
        if procedure.apis is not None:
            apis = procedure.apis
        else:
            outcome = await ctx.llm.structured(self.prompts.messages("apis.md", procedure=procedure),
                                               ApiList, role="generator")
            if not outcome.ok:
                return infra(None, outcome)
            drafts = outcome.value.apis
            apis = [api_from_draft(d) for d in drafts]
        checked = procedure.model_copy(update={"apis": apis})
        broken = check_apis(apis, drafts)
        return filtered(CheckedProcedure(procedure=checked, rejection=broken[0] if broken else None),
                        "apis", broken)


# --- flowgraph ----------------------------------------------------------------------------------


class FlowgraphDraft(BaseModel):
    nodes: list[FlowNode]
    edges: list[GraphEdge]


class AlmitaFlowgraph(Extractor):
    """The procedure as a flowgraph, checked against the flowgraph rules."""

    name = "flowgraph"
    statuses = FILTERED
    empty_hint = ("its graphs must pass ALMITA's rules, which mock/schema's fabricated graphs never do: run "
                  "with a real model (--model gpt-4o-mini), or offline with the scripted model of "
                  "tests/almita_script.py (--model mock/function --set "
                  "llm.default.options.function=tests.almita_script:answer)")
    scores = {"almita-filter": FILTER}
    Config = PromptsOnly
    inputs = {"checked": CheckedProcedure}
    output = Flowgraph
    roles = GENERATOR_ROLE

    def __init__(self, config: PromptsOnly) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "flowgraph.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    async def run(self, ctx, checked: CheckedProcedure) -> Output[Flowgraph]:
        procedure = checked.procedure
        outcome = await ctx.llm.structured(self.prompts.messages("flowgraph.md", procedure=procedure),
                                           FlowgraphDraft, role="generator")
        if not outcome.ok:
            return infra(None, outcome)
        draft = outcome.value
        broken = check_flowgraph(draft.nodes, draft.edges, [a.name for a in procedure.apis or []])
        graph = Flowgraph(procedure=procedure, nodes=draft.nodes, edges=draft.edges,
                          rejection=broken[0] if broken else None)
        return filtered(graph, "flowgraphs", broken)


# --- conversation graph -------------------------------------------------------------------------


class ConversationNodeDraft(BaseModel):
    id: str
    role: str = Field(description="assistant, user or api.")
    text: str
    api: str | None = Field(default=None, description="For an api node: the API's name.")


class ConversationGraphDraft(BaseModel):
    nodes: list[ConversationNodeDraft]
    edges: list[GraphEdge]


class AlmitaConversationGraph(Extractor):
    """The flowgraph as a conversation graph (one-shot prompted), checked against the
    conversation-graph rules."""

    name = "conversation-graph"
    statuses = FILTERED
    empty_hint = AlmitaFlowgraph.empty_hint
    scores = {"almita-filter": FILTER}
    Config = PromptsOnly
    inputs = {"flowgraph": Flowgraph}
    output = ConversationGraph
    roles = GENERATOR_ROLE

    def __init__(self, config: PromptsOnly) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "conversation_graph.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    async def run(self, ctx, flowgraph: Flowgraph) -> Output[ConversationGraph]:
        procedure = flowgraph.procedure
        messages = self.prompts.messages(
            "conversation_graph.md", procedure=procedure, example_flowgraph=graph_json(EXAMPLE_FLOWGRAPH),
            example_graph=graph_json(EXAMPLE_GRAPH),
            flowgraph=json.dumps({"nodes": [n.model_dump() for n in flowgraph.nodes],
                                  "edges": [e.model_dump() for e in flowgraph.edges]}, indent=1))
        outcome = await ctx.llm.structured(messages, ConversationGraphDraft, role="generator")
        if not outcome.ok:
            return infra(None, outcome)
        nodes = [ConversationNode(**n.model_dump()) for n in outcome.value.nodes]
        edges = outcome.value.edges
        broken = check_conversation_graph(nodes, edges, [a.name for a in procedure.apis or []])
        graph = ConversationGraph(procedure=procedure, nodes=nodes, edges=edges,
                                  rejection=broken[0] if broken else None)
        return filtered(graph, "graphs", broken)


# --- noise ------------------------------------------------------------------------------------


class NoiseDraft(BaseModel):
    user: str = Field(description="The customer's interruption.")
    reply: str = Field(description="The agent's refusal, returning to the original issue.")


class NoiseList(BaseModel):
    items: list[NoiseDraft]


class NoiseConfig(StrictModel):
    probability: float = Field(default=0.2, ge=0, le=1, description="Chance that noise follows an "
                               "assistant node.")
    attack_share: float = Field(default=0.5, ge=0, le=1, description="Share of the noise that is an "
                                "attack (prompt injection, impersonation, …) rather than an "
                                "off-topic message.")
    prompts: PromptsFolder = None


class AlmitaNoise(Extractor):
    """After each assistant node, with ``probability``, a branch where the customer says
    something outside the procedure (off-topic, or an attack) and the agent declines and returns
    to the issue; the original branches stay."""

    name = "noise"
    Config = NoiseConfig
    inputs = {"graph": ConversationGraph}
    output = ConversationGraph
    roles = GENERATOR_ROLE

    def __init__(self, config: NoiseConfig) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, ("system.md", "noise.md"))

    def fingerprint(self):
        return self.prompts.fingerprint()

    async def run(self, ctx, graph: ConversationGraph) -> Output[ConversationGraph]:
        c: NoiseConfig = self.config
        rng = ctx.rng("noise")
        points = []
        for node in graph.nodes:
            if node.role == "assistant" and node.noise is None and rng.random() < c.probability:
                kind: Literal["off-topic", "attack"] = "attack" if rng.random() < c.attack_share else "off-topic"
                points.append(NoisePoint(node=node.id, kind=kind, text=node.text))
        if not points:
            return Output(value=graph)
        outcome = await ctx.llm.structured(
            self.prompts.messages("noise.md", procedure=graph.procedure, points=points), NoiseList,
            role="generator")
        if not outcome.ok:
            return infra(None, outcome)
        noisy, skipped = insert_noise(graph, points, [(d.user, d.reply) for d in outcome.value.items])
        warnings = [f"{skipped} noise insertions skipped (missing or placeholder text)"] if skipped else []
        return Output(value=noisy, warnings=warnings)
