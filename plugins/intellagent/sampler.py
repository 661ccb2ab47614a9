"""Samplers of policy sets: complexity-uniform random walks over the policy graph (the paper's
Algorithm 1).

An event's complexity is the sum of its policies' challenge scores. A walk starts at a policy
chosen uniformly among all policies. Its target complexity is, among those it can still reach
(at least its first policy's challenge), the one seen least so far in the dataset, counting the
events of earlier batches and the targets already handed out in this batch; so complexities
spread uniformly over [low, high] across the whole dataset. The walk then adds unvisited
policies until the target is reached or exceeded:

- ``weighted-walk`` (Algorithm 1): next policy with probability proportional to the edge weight
  from the current one;
- ``uniform-walk``: next policy uniform among the unvisited ones;
- ``max-walk``: next policy with the largest edge weight (ties broken at random). Its walk is
  nearly fixed by its first policy, so nothing could spread its complexities if it overshot: it
  only takes policies that still fit under the target (and so favours easy ones).

A step may overshoot the target; only the range's upper bound is a hard limit (a policy that
would take the event above ``high`` is not a candidate). Restricting candidates to those that
still fit under the *target* would favour easy policies: on a 30-policy graph, challenge-1
policies were drawn 3.5 times as often as challenge-5 ones; with the bound at ``high`` the
levels are within 1.1 times of each other (``tests/test_sampler.py``). Dead ends never crash a
walk: when the current policy has no positive-weight edge to a candidate (zero weights, isolated
nodes), the walk jumps to a candidate chosen uniformly (a "teleport", counted in the spec).

Randomness comes from the run seed, the graph and the complexity range, never from the number of
events: asking for 40 events after 30 keeps the first 30 and adds 10.
"""

from __future__ import annotations

import random
from collections import Counter

from pydantic import Field, model_validator

from intellagent.bounds import MAX_ITEMS
from intellagent.hashing import content_hash
from intellagent.model import StrictModel
from intellagent.steps import ItemEstimate, Sampler
from intellagent_plugins.intellagent.artefacts import EventSpec, PolicyGraph

Weights = dict[tuple[str, str], float]


class Config(StrictModel):
    events: int = Field(default=30, ge=1, le=MAX_ITEMS)
    complexity: tuple[int, int] = Field(default=(2, 11), description="[low, high] event complexity.")
    batch: int = Field(default=20, ge=1, le=MAX_ITEMS, description="Events whose targets are drawn "
                                                                   "together.")

    @model_validator(mode="after")
    def _range(self) -> "Config":
        low, high = self.complexity
        if not 1 <= low <= high:
            raise ValueError("complexity must be [low, high] with 1 <= low <= high")
        return self


class WalkSampler(Sampler):
    Config = Config
    overshoot = True  # Algorithm 1: walk until the target is reached or exceeded
    inputs = {"graph": PolicyGraph}
    output = list[EventSpec]

    def estimate(self, env) -> ItemEstimate:
        """No model call; ``events`` policy sets."""
        return ItemEstimate(outputs=self.config.events)

    def run(self, ctx, graph: PolicyGraph) -> list[EventSpec]:
        count = self.config.events
        base = (content_hash(graph), list(self.config.complexity), self.config.batch)
        rng = ctx.seeded("targets", *base)
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
                walk_rng = ctx.seeded("walk", *base, len(specs))
                policies, teleports = self._walk(walk_rng, ids, challenge, weights, start, target, high)
                complexity = sum(challenge[p] for p in policies)
                histogram[complexity] += 1
                specs.append(EventSpec(id=f"E{len(specs) + 1:04d}", policies=policies,
                                       target_complexity=target, complexity=complexity,
                                       teleports=teleports))
        return specs

    def _walk(self, rng: random.Random, ids: list[str], challenge: dict[str, int],
              weights: Weights, start: str, target: int, high: int) -> tuple[list[str], int]:
        current = start
        chosen, total, teleports = [current], challenge[current], 0
        while total < target:
            # overshooting the target is fine, leaving the range is not
            room = (high if self.overshoot else target) - total
            candidates = [p for p in ids if p not in chosen and challenge[p] <= room]
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
    overshoot = False

    def _next(self, rng, current, candidates, weights):
        best = max(weights.get((current, p), 0.0) for p in candidates)
        if best <= 0:
            return None
        return rng.choice([p for p in candidates if weights.get((current, p), 0.0) == best])
