"""Paths through a conversation graph, from the root to a leaf.

- :func:`inverse_visit_paths` (ALMITA's sampler): at each node the next edge is drawn with
  probability proportional to 1 / (visits of its target + 1), where visits count every earlier
  path of the same graph; so branches already walked give way to those not yet seen and node
  coverage grows faster than with a plain random walk.
- :func:`uniform_paths`: a plain random walk (every outgoing edge equally likely), for comparison.

A path is the root followed by the edges it took (``(source, target, key)``; the key tells
parallel edges apart, e.g. two outputs of one API call leading to the same reply). The graph must
be acyclic (the conversation-graph rules make sure).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Callable

import networkx as nx

Edge = tuple[str, str, int]
WalkPath = tuple[str, list[Edge]]


def _walk(g: nx.MultiDiGraph, root: str, choose: Callable[[list[Edge]], Edge]) -> WalkPath:
    edges: list[Edge] = []
    node = root
    while g.out_degree(node):
        options = sorted(g.out_edges(node, keys=True), key=lambda e: (str(e[1]), e[2]))
        edge = choose(options)
        edges.append(edge)
        node = edge[1]
    return root, edges


def inverse_visit_paths(g: nx.MultiDiGraph, root: str, n: int, rng: random.Random,
                        visits: Counter | None = None) -> list[WalkPath]:
    """``n`` walks, each edge drawn in proportion to 1 / (its target's visit count + 1)."""
    visits = visits if visits is not None else Counter()
    paths = []
    for _ in range(n):
        def choose(options: list[Edge]) -> Edge:
            weights = [1.0 / (visits[e[1]] + 1) for e in options]
            return rng.choices(options, weights=weights)[0]

        path = _walk(g, root, choose)
        visits[root] += 1
        for edge in path[1]:
            visits[edge[1]] += 1
        paths.append(path)
    return paths


def uniform_paths(g: nx.MultiDiGraph, root: str, n: int, rng: random.Random) -> list[WalkPath]:
    """``n`` plain random walks: every outgoing edge equally likely."""
    return [_walk(g, root, rng.choice) for _ in range(n)]


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


SAMPLERS = {"inverse-visit": inverse_visit_paths, "uniform": uniform_paths}
