"""Noise in a conversation graph: after an assistant node, a branch where the customer says
something the procedure does not cover (an off-topic message, or an attack such as a prompt
injection) and the agent declines and returns to the issue.

The branch is added beside the node's own branches: ``A → noise (user) → refusal (assistant) →``
the same user nodes that followed ``A``, so every conversation of the graph stays possible and
the graph keeps every conversation-graph rule (a refusal after a leaf is a leaf).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from intellagent_plugins.almita.artefacts import ConversationGraph, ConversationNode, GraphEdge
from intellagent_plugins.almita.rules import placeholder


class NoisePoint(BaseModel):
    node: str
    kind: Literal["off-topic", "attack"]
    text: str


def insert_noise(graph: ConversationGraph, points: list[NoisePoint],
                 texts: list[tuple[str, str]]) -> tuple[ConversationGraph, int]:
    """``graph`` with a noise branch after each point that has a (user, reply) text pair; and how
    many points were skipped (no pair, or a pair that is not concrete text)."""
    nodes = list(graph.nodes)
    edges = list(graph.edges)
    ids = {n.id for n in nodes}
    inserted = skipped = 0
    for point, pair in zip(points, texts + [None] * (len(points) - len(texts))):  # type: ignore[operator]
        if pair is None or placeholder(pair[0]) or placeholder(pair[1]):
            skipped += 1
            continue
        user_id, reply_id = f"{point.node}~{point.kind}", f"{point.node}~{point.kind}~reply"
        while user_id in ids or reply_id in ids:
            user_id, reply_id = user_id + "'", reply_id + "'"
        ids |= {user_id, reply_id}
        nodes += [ConversationNode(id=user_id, role="user", text=pair[0].strip(), noise=point.kind),
                  ConversationNode(id=reply_id, role="assistant", text=pair[1].strip(), noise=point.kind)]
        children = [e for e in graph.edges if e.source == point.node]
        edges += [GraphEdge(source=point.node, target=user_id), GraphEdge(source=user_id, target=reply_id)]
        edges += [GraphEdge(source=reply_id, target=e.target, text=e.text) for e in children]
        inserted += 1
    return graph.model_copy(update={"nodes": nodes, "edges": edges,
                                    "noise_inserted": graph.noise_inserted + inserted}), skipped
