"""``policy-graph``: flows → policies (category, challenge) → weighted policy graph.

Edges are scored one policy against many others per call (in blocks when there are many), so P
policies cost at most P-1 edge calls instead of the P(P-1)/2 of pairwise scoring (kept as
``edges: pairwise`` for comparison). Scores are stored by the hashes of the two policy texts, so a
pair of unchanged policies is never scored again; each unordered pair is scored once, and the
weight is symmetric (the mean of both directions when both exist, e.g. scored by older runs).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from pydantic import BaseModel, Field, create_model

from intellagent.errors import IntellagentError
from intellagent.model import StrictModel
from intellagent.steps import Extractor
from intellagent_plugins.intellagent.artefacts import CATEGORIES, Category, Edge, Policy, PolicyGraph

SYSTEM = ("You analyse the system prompt of a conversational AI agent to build a test plan. "
          "Answer only with the requested structure.")


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
    challenge: int = Field(ge=1, le=5, description="1 = trivial to follow, 5 = very hard.")


class FlowPolicies(BaseModel):
    policies: list[PolicyDraft] = Field(min_length=1, max_length=15)


class PairScore(BaseModel):
    weight: int = Field(ge=0, le=10)


class Config(StrictModel):
    edges: Literal["per-policy", "pairwise"] = "per-policy"
    block_size: int = Field(default=40, ge=1, description="Most policies scored in one call.")
    max_policies: int = Field(default=60, ge=2)


Score = Annotated[int, Field(ge=0, le=10)]


def _scores_model(count: int) -> type[BaseModel]:
    """Exactly one score per listed policy, so the answer cannot skip or invent one."""
    return create_model(f"EdgeScores{count}", weights=(list[Score], Field(
        min_length=count, max_length=count,
        description="One integer 0-10 per listed policy, in the order listed.")))


class PolicyGraphExtractor(Extractor):
    """The environment's prompt → flows → policies (category, challenge) → weighted graph."""

    name = "policy-graph"
    Config = Config
    output = PolicyGraph
    roles = {"extractor": "reads the agent's prompt into flows and policies",
             "edges": "scores how likely two policies meet in one conversation"}

    async def _call(self, ctx, messages, model, role="extractor"):
        outcome = await ctx.llm.structured(messages, model, role=role)
        if not outcome.ok:
            raise IntellagentError(f"policy extraction failed: {outcome.error}", item="extractor")
        return outcome.value

    async def run(self, ctx) -> PolicyGraph:
        env = ctx.env
        prompt = [{"role": "system", "content": SYSTEM}]
        if env.task:
            task = env.task
            flows = (await self._call(ctx, prompt + [{"role": "user", "content":
                     f"Agent prompt:\n\n{env.prompt}\n\nTask:\n{task}\n\nList the distinct "
                     "conversation flows this agent handles."}], FlowsOnly)).flows
        else:
            drafted = await self._call(ctx, prompt + [{"role": "user", "content":
                      f"Agent prompt:\n\n{env.prompt}\n\nDescribe the agent's task and list the "
                      "distinct conversation flows it handles."}], TaskAndFlows)
            task, flows = drafted.task, drafted.flows
        per_flow = await asyncio.gather(*[self._call(ctx, prompt + [{"role": "user", "content":
            f"Agent prompt:\n\n{env.prompt}\n\nFlow: {f.name} — {f.description}\n\nList every "
            "policy the agent must follow in this flow, each self-contained, with its category "
            f"(one of: {', '.join(CATEGORIES)}) and a challenge score from 1 to 5."}], FlowPolicies)
            for f in flows])
        policies: list[Policy] = []
        seen: set[str] = set()
        for flow, drafted_policies in zip(flows, per_flow):
            for d in drafted_policies.policies:
                policy = Policy(id=f"P{len(policies) + 1}", flow=flow.name, text=d.text,
                                category=d.category, challenge=d.challenge)
                if policy.text_hash in seen or len(policies) >= self.config.max_policies:
                    continue
                seen.add(policy.text_hash)
                policies.append(policy)
        edges = await self._edges(ctx, env.prompt, policies)
        return PolicyGraph(environment=env.name, task=task, flows=[f.name for f in flows],
                           policies=policies, edges=edges)

    async def _edges(self, ctx, agent_prompt: str, policies: list[Policy]) -> list[Edge]:
        """Symmetric weights from directional scores, asking only for pairs never scored."""
        scores: dict[tuple[str, str], float] = {}  # (text_hash_a, text_hash_b) → a's score of b

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
            listing = "\n".join(f"{i + 1}. {b.text}" for i, b in enumerate(others))
            model = _scores_model(len(others))
            result = await self._call(ctx, [{"role": "system", "content": SYSTEM}, {
                "role": "user", "content":
                f"Policy under study: {a.text}\n\nFor each policy below, rate from 0 to 10 how "
                "likely it is that a single conversation with this agent involves both it and "
                f"the policy under study.\n\n{listing}"}], model, role="edges")
            for b, w in zip(others, result.weights):
                remember(a, b, float(min(10, max(0, w))))

        async def score_pair(a: Policy, b: Policy) -> None:
            result = await self._call(ctx, [{"role": "system", "content": SYSTEM}, {
                "role": "user", "content": f"Policy A: {a.text}\nPolicy B: {b.text}\n\nRate from "
                "0 to 10 how likely one conversation involves both."}], PairScore, role="edges")
            remember(a, b, float(result.weight))

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
        return edges
