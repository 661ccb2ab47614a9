"""Samplers (the paper's Algorithm 1): the complexity histogram and the first policy are uniform,
policies of every challenge level are drawn alike, walks reach or exceed their target without
leaving the range, walks follow the edge weights, dead ends never crash a walk, and a larger
event count keeps the events already drawn."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from intellagent.environment import load_environment
from intellagent.testing.harness import step_context
from intellagent_plugins.intellagent.artefacts import Edge, Policy, PolicyGraph
from intellagent_plugins.intellagent.sampler import Config, MaxWalk, UniformWalk, WeightedWalk
from tests.conftest import REPO

# chi-square critical values at p = 0.001
CHI2_CRIT = {9: 27.877, 29: 58.301}


def chi_square(counts: Counter, categories: list, total: int) -> float:
    expected = total / len(categories)
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in categories)


def graph(n: int = 30, *, seed: int = 5, isolated: int = 2, zero_share: float = 0.3) -> PolicyGraph:
    rng = random.Random(seed)
    policies = [Policy(id=f"P{i + 1}", flow="f", text=f"policy {i}", category="other",
                       challenge=1 + i % 5) for i in range(n)]
    edges = []
    for i in range(n):
        for j in range(i + 1, n):
            if i < isolated or j < isolated or rng.random() < zero_share:
                weight = 0.0
            else:
                weight = float(rng.randint(1, 10))
            edges.append(Edge(a=f"P{i + 1}", b=f"P{j + 1}", weight=weight))
    return PolicyGraph(environment="x", task="t", flows=["f"], policies=policies, edges=edges)


@pytest.fixture(scope="module")
def ctx():
    return step_context(load_environment(REPO / "environments" / "education"), seed=11)


@pytest.mark.parametrize("sampler", [WeightedWalk, UniformWalk, MaxWalk])
def test_complexity_and_first_policy_are_uniform(ctx, sampler):
    g = graph()
    total = 3000
    specs = sampler(Config(events=total, complexity=(2, 11))).run(ctx, g)
    assert len(specs) == total and len({s.id for s in specs}) == total
    complexities = Counter(s.complexity for s in specs)
    assert set(complexities) <= set(range(2, 12))
    assert chi_square(complexities, list(range(2, 12)), total) < CHI2_CRIT[9], complexities
    firsts = Counter(s.policies[0] for s in specs)
    assert chi_square(firsts, [p.id for p in g.policies], total) < CHI2_CRIT[29], firsts
    for s in specs:
        assert len(set(s.policies)) == len(s.policies)
        assert s.complexity == sum(g.policy(p).challenge for p in s.policies)
        assert s.complexity <= 11  # the range's upper bound is never left
    # Algorithm 1: a walk goes on until its target is reached or exceeded (short only when no
    # unvisited policy fits under the range's bound)
    short = [s for s in specs if s.complexity < s.target_complexity]
    assert len(short) / total < 0.02, len(short)
    if sampler.overshoot:
        assert any(s.complexity > s.target_complexity for s in specs)
    else:
        assert all(s.complexity <= s.target_complexity or len(s.policies) == 1 for s in specs)


def inclusion_by_level(g: PolicyGraph, specs) -> dict[int, float]:
    """Mean inclusions per policy per event, by challenge level."""
    counts = Counter(p for s in specs for p in s.policies)
    levels = sorted({p.challenge for p in g.policies})
    return {level: sum(counts[p.id] for p in g.policies if p.challenge == level)
            / sum(1 for p in g.policies if p.challenge == level) / len(specs) for level in levels}


def test_policies_of_every_challenge_level_are_drawn_alike(ctx):
    g = graph()
    specs = WeightedWalk(Config(events=4000, complexity=(2, 11))).run(ctx, g)
    by_level = inclusion_by_level(g, specs)
    ratio = max(by_level.values()) / min(by_level.values())
    assert ratio <= 1.3, by_level  # walking only among policies that fit the target gave 3.5


def test_weighted_walk_follows_edge_weights(ctx):
    policies = [Policy(id=f"P{i}", flow="f", text=f"t{i}", category="other", challenge=1)
                for i in (1, 2, 3)]
    g = PolicyGraph(environment="x", task="t", flows=["f"], policies=policies, edges=[
        Edge(a="P1", b="P2", weight=9), Edge(a="P1", b="P3", weight=1), Edge(a="P2", b="P3", weight=0)])
    specs = WeightedWalk(Config(events=4000, complexity=(2, 2))).run(ctx, g)
    after_p1 = Counter(s.policies[1] for s in specs if s.policies[0] == "P1")
    share = after_p1["P2"] / sum(after_p1.values())
    assert 0.85 < share < 0.95, after_p1
    # P2 and P3 share no edge: from P2 the walk can only go on to P1 (P3 is a teleport)
    from_p2 = Counter(s.policies[1] for s in specs if s.policies[0] == "P2")
    assert set(from_p2) == {"P1"}
    maxed = MaxWalk(Config(events=500, complexity=(2, 2))).run(ctx, g)
    assert {s.policies[1] for s in maxed if s.policies[0] == "P1"} == {"P2"}
    uniform = UniformWalk(Config(events=4000, complexity=(2, 2))).run(ctx, g)
    share_u = Counter(s.policies[1] for s in uniform if s.policies[0] == "P1")
    assert 0.4 < share_u["P2"] / sum(share_u.values()) < 0.6


def test_dead_ends_zero_weights_and_isolated_nodes(ctx):
    g = graph(n=12, isolated=12)  # no positive edge at all
    specs = WeightedWalk(Config(events=300, complexity=(2, 11))).run(ctx, g)
    assert all(s.teleports == len(s.policies) - 1 for s in specs)
    assert Counter(s.complexity for s in specs)[11] > 0
    single = PolicyGraph(environment="x", task="t", flows=["f"], policies=[
        Policy(id="P1", flow="f", text="only", category="other", challenge=3)])
    specs = WeightedWalk(Config(events=10, complexity=(2, 11))).run(ctx, single)
    assert {tuple(s.policies) for s in specs} == {("P1",)} and {s.complexity for s in specs} == {3}


def test_same_seed_same_events_other_seed_other_events(ctx):
    g = graph()
    first = WeightedWalk(Config(events=50)).run(ctx, g)
    again = WeightedWalk(Config(events=50)).run(ctx, g)
    other = WeightedWalk(Config(events=50)).run(step_context(ctx.env, seed=12), g)
    assert first == again and first != other


def test_more_events_keep_the_events_already_drawn(ctx):
    g = graph()
    thirty = WeightedWalk(Config(events=30)).run(ctx, g)
    forty = WeightedWalk(Config(events=40)).run(ctx, g)
    assert forty[:30] == thirty and len(forty) == 40
    assert WeightedWalk(Config(events=30, complexity=(2, 9))).run(ctx, g) != thirty


def test_config_refuses_a_bad_range():
    with pytest.raises(ValueError, match="low <= high"):
        Config(complexity=(5, 2))
