"""Samplers of policy sets: complexity-uniform random walks over the policy graph.

An event's complexity is the sum of its policies' challenge scores. A walk starts at a policy
chosen uniformly among all policies. Its target complexity is, among those it can still reach
(at least its first policy's challenge), the one seen least so far in the dataset, counting the
events of earlier batches and the targets already handed out in this batch; so complexities
spread uniformly over [low, high] across the whole dataset. The walk then adds policies until
the target is reached:

- ``weighted-walk`` (the paper's Algorithm 1): next policy with probability proportional to the
  edge weight from the current one;
- ``uniform-walk``: next policy uniform among the unvisited ones;
- ``max-walk``: next policy with the largest edge weight (ties broken at random).

Only unvisited policies that still fit under the target are candidates, so an event does not
overshoot. Dead ends never crash a walk: when the current policy has no positive-weight edge to a
fitting candidate (zero weights, isolated nodes), the walk jumps to a fitting candidate chosen
uniformly (a "teleport", counted in the spec). A walk ends short of its target only when no
unvisited policy fits at all; later batches then make up for it.
"""

from __future__ import annotations

import random
from collections import Counter

from pydantic import Field, model_validator

from intellagent.model import StrictModel
from intellagent.steps import Sampler
from intellagent_plugins.intellagent.artefacts import EventSpec, PolicyGraph

Weights = dict[tuple[str, str], float]


class Config(StrictModel):
    events: int = Field(default=30, ge=1)
    complexity: tuple[int, int] = Field(default=(2, 11), description="[low, high] event complexity.")
    batch: int = Field(default=20, ge=1, description="Events whose targets are drawn together.")

    @model_validator(mode="after")
    def _range(self) -> "Config":
        low, high = self.complexity
        if not 1 <= low <= high:
            raise ValueError("complexity must be [low, high] with 1 <= low <= high")
        return self


class WalkSampler(Sampler):
    Config = Config
    inputs = {"graph": PolicyGraph}
    output = list[EventSpec]

    def run(self, ctx, graph: PolicyGraph) -> list[EventSpec]:
        count = self.config.events
        rng = ctx.rng("sampler")
        ids = [p.id for p in graph.policies]
        challenge = {p.id: p.challenge for p in graph.policies}
        weights: Weights = {(e.a, e.b): e.weight for e in graph.edges}
        weights |= {(e.b, e.a): e.weight for e in graph.edges}
        low, high = self.config.complexity
        high = max(low, min(high, sum(challenge.values())))  # no target beyond all policies
        histogram: Counter[int] = Counter()  # achieved complexities of earlier batches
        specs: list[EventSpec] = []
        while len(specs) < count:
            pending: Counter[int] = Counter()  # targets handed out in this batch
            batch = []
            for _ in range(min(self.config.batch, count - len(specs))):
                start = rng.choice(ids)
                floor = max(low, challenge[start])
                options = range(floor, max(floor, high) + 1)
                seen = {c: histogram[c] + pending[c] for c in options}
                least = min(seen.values())
                target = rng.choice([c for c in options if seen[c] == least])
                pending[target] += 1
                batch.append((start, target))
            for start, target in batch:
                policies, teleports = self._walk(rng, ids, challenge, weights, start, target)
                complexity = sum(challenge[p] for p in policies)
                histogram[complexity] += 1
                specs.append(EventSpec(id=f"E{len(specs) + 1:04d}", policies=policies,
                                       target_complexity=target, complexity=complexity,
                                       teleports=teleports))
        return specs

    def _walk(self, rng: random.Random, ids: list[str], challenge: dict[str, int],
              weights: Weights, start: str, target: int) -> tuple[list[str], int]:
        current = start
        chosen, total, teleports = [current], challenge[current], 0
        while total < target:
            remaining = target - total
            candidates = [p for p in ids if p not in chosen and challenge[p] <= remaining]
            if not candidates:
                break
            nxt = self._next(rng, current, candidates, weights)
            if nxt is None:
                nxt = rng.choice(candidates)
                teleports += 1
            chosen.append(nxt)
            total += challenge[nxt]
            current = nxt
        return chosen, teleports

    def _next(self, rng: random.Random, current: str, candidates: list[str],
              weights: Weights) -> str | None:
        linked = [(p, weights.get((current, p), 0.0)) for p in candidates]
        linked = [(p, w) for p, w in linked if w > 0]
        if not linked:
            return None
        return rng.choices([p for p, _ in linked], weights=[w for _, w in linked])[0]


class WeightedWalk(WalkSampler):
    name = "weighted-walk"


class UniformWalk(WalkSampler):
    name = "uniform-walk"

    def _next(self, rng, current, candidates, weights):
        return rng.choice(candidates)


class MaxWalk(WalkSampler):
    name = "max-walk"

    def _next(self, rng, current, candidates, weights):
        best = max(weights.get((current, p), 0.0) for p in candidates)
        if best <= 0:
            return None
        return rng.choice([p for p in candidates if weights.get((current, p), 0.0) == best])
