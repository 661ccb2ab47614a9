"""Paths through a conversation graph, from the root to a leaf.

- :func:`inverse_visit_paths` (ALMITA's sampler): at each node the next child is drawn with
  probability proportional to 1 / (its visits + 1), where visits count every earlier path of the
  same graph; so branches already walked give way to those not yet seen and node coverage grows
  faster than with a plain random walk.
- :func:`uniform_paths`: a plain random walk (every child equally likely), for comparison.

A path is the root followed by the edges it took (``(source, target, key)``; the key tells
parallel edges apart, e.g. two outputs of one API call leading to the same reply). Both samplers
draw a *child* first, so parallel edges do not multiply a child's chance, then one of the edges
to it: the inverse-visit sampler again by 1 / (the edge's visits + 1) — the child's probability
is the method's, and among the outputs that lead to it the one not yet taken gives a path not
yet sampled — the uniform walk uniformly. The graph must be acyclic (the conversation-graph
rules make sure).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable

import networkx as nx

Edge = tuple[str, str, int]
WalkPath = tuple[str, list[Edge]]


Weigh = Callable[[Any], float]  # a child (node id) or an edge → its weight


def _walk(g: nx.MultiDiGraph, root: str, rng: random.Random, weigh: Weigh) -> WalkPath:
    """A walk from ``root`` to a leaf: at each node a child drawn by ``weigh``, then one of the
    edges to it by ``weigh``."""
    edges: list[Edge] = []
    node = root
    while g.out_degree(node):
        children = sorted({v for _, v in g.out_edges(node)}, key=str)
        child = rng.choices(children, weights=[weigh(c) for c in children])[0]
        options = sorted(g[node][child])
        key = options[0] if len(options) == 1 else \
            rng.choices(options, weights=[weigh((node, child, k)) for k in options])[0]
        edges.append((node, child, key))
        node = child
    return root, edges


def inverse_visit_paths(g: nx.MultiDiGraph, root: str, n: int, rng: random.Random,
                        visits: Counter | None = None) -> list[WalkPath]:
    """``n`` walks, each child drawn in proportion to 1 / (its visit count + 1) and each edge to
    it likewise; ``visits`` (node ids and edges) carries the counts across calls."""
    visits = visits if visits is not None else Counter()
    paths = []
    for _ in range(n):
        path = _walk(g, root, rng, lambda x: 1.0 / (visits[x] + 1))
        visits[root] += 1
        for edge in path[1]:
            visits[edge[1]] += 1
            visits[edge] += 1
        paths.append(path)
    return paths


def uniform_paths(g: nx.MultiDiGraph, root: str, n: int, rng: random.Random) -> list[WalkPath]:
    """``n`` plain random walks: every child equally likely, and every edge to it."""
    return [_walk(g, root, rng, lambda _: 1.0) for _ in range(n)]


def coverage(g: nx.MultiDiGraph, paths: list[WalkPath]) -> tuple[float, float]:
    """The shares of the graph's nodes and edges that the paths cover."""
    nodes: set[str] = set()
    edges: set[Edge] = set()
    for root, path in paths:
        nodes.add(root)
        for edge in path:
            nodes.add(edge[1])
            edges.add(edge)
    return (len(nodes) / g.number_of_nodes() if g.number_of_nodes() else 1.0,
            len(edges) / g.number_of_edges() if g.number_of_edges() else 1.0)
