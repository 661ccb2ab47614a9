"""``policy-graph``: flows → policies (category, challenge) → weighted policy graph.

Edges are scored one policy against many others per call, in blocks of ``block_size``: a hub
policy is scored against every policy it has no score with yet, so a graph of P policies costs
the sum over k = 1 … P−1 of ceil(k / block_size) edge calls (P−1 while P ≤ block_size + 1)
instead of the P(P−1)/2 of pairwise scoring (kept as ``edges: pairwise`` for comparison). The
scorer sees the agent's prompt and answers with a score per policy id. Scores are remembered by
the hashes of the two policy texts, so a pair of unchanged policies is never scored again; the
weight is symmetric (the mean of both directions when both exist, e.g. scored by older runs).
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from intellagent.estimate import tokens
from intellagent.bounds import MAX_TURNS
from intellagent.llm import ResponseModel
from intellagent.model import StrictModel
from intellagent.prompts import PromptsFolder
from intellagent.steps import DEGRADED, Extractor, ItemEstimate, Output, RoleLoad
from intellagent.llm.types import Outcome, Status
from intellagent_plugins.intellagent.artefacts import CATEGORIES, Category, Edge, Policy, PolicyGraph
from intellagent_plugins.intellagent.policy_text import clean
from intellagent_plugins.intellagent.prompts import Prompts


class FlowDraft(BaseModel):
    name: str = Field(description="Short name of one conversation flow the agent handles.")
    description: str


class TaskAndFlows(BaseModel):
    task: str = Field(description="One paragraph: who the agent serves and what it does.")
    flows: list[FlowDraft] = Field(min_length=1, max_length=12)


class FlowsOnly(BaseModel):
    flows: list[FlowDraft] = Field(min_length=1, max_length=12)


class PolicyDraft(BaseModel):
    text: str = Field(description="The policy as one self-contained instruction.")
    category: Category
    challenge: int = Field(ge=1, le=5, description="1 = a direct rule … 5 = holding a rule under "
                                                   "pressure or across records (see the rubric).")


class FlowPolicies(BaseModel):
    policies: list[PolicyDraft] = Field(min_length=1, max_length=15)


class PairScore(BaseModel):
    weight: int = Field(ge=0, le=10)


class Config(StrictModel):
    edges: Literal["per-policy", "pairwise"] = "per-policy"
    block_size: int = Field(default=40, ge=1, le=MAX_TURNS,
                            description="Most policies scored in one call.")
    merge_similarity: float = Field(default=0.9, ge=0.5, le=1.0, description="Policies whose "
                                    "normalised texts (lower case, no label, punctuation or filler "
                                    "word) are at least this alike (rapidfuzz's ratio) and agree on "
                                    "every number and negation are merged into one; 1.0 merges only "
                                    "texts that normalise to the same words.")
    drop_non_rules: bool = Field(default=True, description="Drop statements that are not rules: "
                                 "section headings, the agent's description of itself.")
    prompts: PromptsFolder = Field(default=None, description="Folder of prompt files replacing the "
                                "built-in ones of the same name.")



Score = Annotated[int, Field(ge=0, le=10)]


def _scores_model(others: list[Policy]) -> type[BaseModel]:
    """A score for exactly the listed policies, each under its id, so the answer cannot skip,
    reorder or invent one."""
    fields = {f"w{i}": (Score, Field(alias=p.id, description=p.text[:120])) for i, p in enumerate(others)}
    return ResponseModel.derive(f"EdgeScores{len(others)}", **fields)


def _failed_status(outcomes: list[Outcome]) -> str:
    """The status of a graph no policy could be extracted for: ``invalid-output`` when every
    failed call's answer did not fit, else ``infra-error`` (both are retried by the next run)."""
    failed = [o.status for o in outcomes if not o.ok]
    return Status.invalid_output.value if failed and all(s is Status.invalid_output for s in failed) \
        else Status.infra_error.value


#: A sentence that states a rule (for the estimate of how many policies a prompt holds).
RULE = re.compile(r"\b(must|should|never|cannot|can't|only|do not|don't|always|not allowed|"
                  r"required?|may not|need to|has to|have to)\b", re.IGNORECASE)
POLICY_TOKENS = 35  # a policy as the edge scorer sees it (id, text) and as the extractor writes it


def edge_calls(policies: int, block_size: int, mode: str = "per-policy") -> int:
    """Edge calls of a fresh graph of ``policies`` policies."""
    if mode == "pairwise":
        return policies * (policies - 1) // 2
    return sum(math.ceil(k / block_size) for k in range(1, policies))


def rules_in(prompt: str) -> tuple[int, int]:
    """About how many policies and flows the analyst will find in ``prompt``: its sentences and
    lines that state a rule (at least 3), and its headings (at least 1, at most one per policy)."""
    statements = re.split(r"(?<=[.!?])\s+|\n+", prompt)
    policies = max(3, sum(1 for s in statements if RULE.search(s)))
    headings = sum(1 for line in prompt.splitlines() if line.lstrip().startswith("#"))
    return policies, min(policies, max(1, headings))


PROMPTS = ("analyst.system.md", "task_and_flows.md", "flows.md", "policies.md", "edges.md",
           "edge_pair.md")


class PolicyGraphExtractor(Extractor):
    """The environment's prompt → flows → policies (category, challenge) → weighted graph."""

    name = "policy-graph"
    version = "2"  # near-duplicates merged, non-rules dropped
    Config = Config
    output = PolicyGraph
    roles = {"extractor": "reads the agent's prompt into flows and policies",
             "edges": "scores how likely two policies meet in one conversation"}

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.prompts = Prompts(config.prompts, PROMPTS)

    def fingerprint(self) -> dict[str, str]:
        return self.prompts.fingerprint()

    def estimate(self, env) -> ItemEstimate:
        """One call for the flows, one per flow for its policies, and the edge calls of the
        policies the prompt's rule statements suggest (:func:`rules_in`, :func:`edge_calls`)."""
        policies, flows = rules_in(env.prompt or "")
        base = tokens(self.prompts.source("analyst.system.md"), env.prompt or "")
        first = base + tokens(self.prompts.source("flows.md" if env.task else "task_and_flows.md"))
        per_flow = base + tokens(self.prompts.source("policies.md")) + 20 * len(CATEGORIES)
        extractor_calls = 1 + flows
        extractor = RoleLoad(calls=extractor_calls,
                             prompt_tokens=(first + flows * per_flow) / extractor_calls,
                             completion_tokens=(40 * flows + flows * POLICY_TOKENS * policies / flows)
                             / extractor_calls)
        n_edges = edge_calls(policies, self.config.block_size, self.config.edges)
        others = min(self.config.block_size, policies / 2) if self.config.edges == "per-policy" else 1
        edges = RoleLoad(calls=n_edges,
                         prompt_tokens=base + tokens(self.prompts.source("edges.md")) + others * POLICY_TOKENS,
                         completion_tokens=10 + 8 * others)
        return ItemEstimate(roles={"extractor": extractor, "edges": edges}, sequential=3)

    def _messages(self, template: str, **values) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prompts.render("analyst.system.md")},
                {"role": "user", "content": self.prompts.render(template, **values)}]

    async def run(self, ctx) -> Output[PolicyGraph]:
        """A graph from whatever could be extracted: a flow whose policies cannot be read is left
        out and an edge that cannot be scored weighs 0, each with a warning, and the graph is
        ``degraded`` (this run uses it, the next run asks the failed calls again); only when
        nothing usable is left does the item end as an infra error (retried by the next run)."""
        env = ctx.env
        if env.task:
            task = env.task
            asked = await ctx.llm.structured(self._messages("flows.md", agent_prompt=env.prompt, task=task),
                                             FlowsOnly, role="extractor")
        else:
            asked = await ctx.llm.structured(self._messages("task_and_flows.md", agent_prompt=env.prompt),
                                             TaskAndFlows, role="extractor")
        if not asked.ok:
            return Output(value=None, status=asked.status.value,
                          note=f"the conversation flows could not be extracted: {asked.error}")
        flows = asked.value.flows
        task = task if env.task else asked.value.task
        per_flow = await asyncio.gather(*[ctx.llm.structured(self._messages(
            "policies.md", agent_prompt=env.prompt, flow=f, categories=CATEGORIES), FlowPolicies,
            role="extractor") for f in flows])
        warnings = [f"the policies of flow '{f.name}' could not be extracted, so the graph lacks "
                    f"them: {o.error}" for f, o in zip(flows, per_flow) if not o.ok]
        listed = [Policy(id="", flow=flow.name, flows=[flow.name], text=d.text, category=d.category,
                         challenge=d.challenge)
                  for flow, outcome in zip(flows, per_flow)
                  for d in (outcome.value.policies if outcome.ok else [])]
        kept = clean(listed, similarity=self.config.merge_similarity,
                     drop_non_rules=self.config.drop_non_rules)
        policies, notes = kept.policies, kept.notes()
        if not policies:
            return Output(value=None, status=_failed_status(per_flow), note="no flow's policies could be "
                          "extracted: " + (warnings[0] if warnings else "the model listed no rule")
                          + "".join(f"; {n}" for n in notes))
        edges, failed = await self._edges(ctx, env.prompt, policies)
        if failed:
            warnings.append(f"{failed[1]} pair(s) of policies could not be scored, so they weigh 0 "
                            f"in the graph: {failed[0]}")
        graph = PolicyGraph(environment=env.name, task=task, flows=[f.name for f in flows],
                            policies=policies, edges=edges, warnings=warnings, notes=notes)
        if failed or not all(o.ok for o in per_flow):
            # a call failed: usable now, but not a graph to keep (the next run asks it again)
            return Output(value=graph, status=DEGRADED, note="; ".join(warnings + notes),
                          warnings=warnings + notes)
        return Output(value=graph, warnings=warnings + notes, note="; ".join(notes))

    async def _edges(self, ctx, agent_prompt: str, policies: list[Policy]
                     ) -> tuple[list[Edge], tuple[str, int] | None]:
        """Symmetric weights from directional scores, asking only for pairs never scored; and
        (the first error, pairs left unscored) when some calls failed."""
        scores: dict[tuple[str, str], float] = {}  # (text_hash_a, text_hash_b) → a's score of b
        errors: list[tuple[str, int]] = []

        def known(a: Policy, b: Policy) -> float | None:
            stored = ctx.recall("edge", a.text_hash, b.text_hash)
            return None if stored is None else float(stored)

        def remember(a: Policy, b: Policy, weight: float) -> None:
            scores[(a.text_hash, b.text_hash)] = weight
            ctx.remember("edge", a.text_hash, b.text_hash, weight)

        for a in policies:
            for b in policies:
                if a is not b and (w := known(a, b)) is not None:
                    scores[(a.text_hash, b.text_hash)] = w

        async def score_against(a: Policy, others: list[Policy]) -> None:
            outcome = await ctx.llm.structured(self._messages(
                "edges.md", agent_prompt=agent_prompt, policy=a, others=others),
                _scores_model(others), role="edges")
            if not outcome.ok:
                errors.append((outcome.error or "", len(others)))
                return
            for i, b in enumerate(others):
                remember(a, b, float(getattr(outcome.value, f"w{i}")))

        async def score_pair(a: Policy, b: Policy) -> None:
            outcome = await ctx.llm.structured(self._messages(
                "edge_pair.md", agent_prompt=agent_prompt, a=a, b=b), PairScore, role="edges")
            if not outcome.ok:
                errors.append((outcome.error or "", 1))
                return
            remember(a, b, float(outcome.value.weight))

        unscored = [(a, b) for i, a in enumerate(policies) for b in policies[i + 1:]
                    if (a.text_hash, b.text_hash) not in scores
                    and (b.text_hash, a.text_hash) not in scores]
        jobs = []
        if self.config.edges == "pairwise":
            jobs = [score_pair(a, b) for a, b in unscored]
        else:
            # Greedy cover: the policy with the most unscored pairs scores all of them in one call
            # (in blocks), so a fresh graph costs P-1 calls and one changed policy costs one.
            while unscored:
                degree: dict[str, int] = {}
                for a, b in unscored:
                    degree[a.id] = degree.get(a.id, 0) + 1
                    degree[b.id] = degree.get(b.id, 0) + 1
                hub_id = max(degree, key=lambda pid: (degree[pid], -int(pid[1:]) if pid[1:].isdigit() else 0))
                hub = next(p for p in policies if p.id == hub_id)
                others = [b if a is hub else a for a, b in unscored if hub in (a, b)]
                unscored = [(a, b) for a, b in unscored if hub not in (a, b)]
                for start in range(0, len(others), self.config.block_size):
                    jobs.append(score_against(hub, others[start:start + self.config.block_size]))
        await asyncio.gather(*jobs)

        edges = []
        for i, a in enumerate(policies):
            for b in policies[i + 1:]:
                both = [scores[k] for k in ((a.text_hash, b.text_hash), (b.text_hash, a.text_hash))
                        if k in scores]
                edges.append(Edge(a=a.id, b=b.id, weight=round(sum(both) / len(both), 2) if both else 0.0))
        return edges, ((errors[0][0], sum(n for _, n in errors)) if errors else None)
