"""The rules a generated flowgraph or conversation graph must keep, checked with networkx.

Each rule has a name (what the funnel and the item's note say) and a check that returns the
detail of the first place it is broken, or None. A graph is kept only when it breaks no rule;
:func:`check_flowgraph` and :func:`check_conversation_graph` return every broken rule in the
order below, so a rejection always names the same rule for the same fault.

Flowgraph (the procedure as agent messages and API calls): exactly one root, of type
``start_message``; node types ``start_message``, ``message``, ``api``, ``end_message``;
concrete text in every node and edge; the edges out of an api node carry its possible outputs;
the edges out of message nodes carry user messages; end nodes are leaves (and every leaf is an
end node). Loops are allowed: a procedure may ask again.

Conversation graph (every conversation the procedure allows): assistant, user and api nodes; one
root, the agent's opening message; no cycle (every walk ends); a user node is followed only by
assistant or api nodes, an assistant node only by user nodes, an api node by assistant or api
nodes, along edges that carry its outputs; leaves are assistant nodes.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

import networkx as nx

from intellagent_plugins.almita.artefacts import ConversationNode, FlowNode, GraphEdge, Rejection

FLOW_TYPES = ("start_message", "message", "api", "end_message")
CONVERSATION_ROLES = ("assistant", "user", "api")

# Text that stands for content instead of being it: {order_id}, {{ name }}, <customer name>,
# [ORDER ID], TODO, "...". A JSON object ({"status": "shipped"}) is content, not a placeholder.
PLACEHOLDER = re.compile(r"\{\{?\s*[A-Za-z_][\w .-]*\s*\}\}?|<\s*[A-Za-z_][\w .-]*>|\[[A-Z][A-Z0-9_ ]*\]"
                         r"|\bTODO\b|\bTBD\b|^\W*$|\blorem ipsum\b")


def placeholder(text: str) -> str | None:
    """Why ``text`` is not concrete (empty, or a placeholder), or None."""
    if not text or not text.strip():
        return "empty"
    found = PLACEHOLDER.search(text.strip())
    return f"placeholder {found.group(0)!r}" if found else None


def build_graph(nodes: Iterable[FlowNode | ConversationNode], edges: Iterable[GraphEdge]) -> nx.MultiDiGraph:
    """The graph as networkx holds it: node attributes from the nodes, one keyed edge per edge
    (parallel edges are different outputs of one API call). Edges to unknown nodes are left out
    (the ``known-endpoints`` rule names them)."""
    g = nx.MultiDiGraph()
    for node in nodes:
        if node.id not in g:
            g.add_node(node.id, **node.model_dump())
    for i, edge in enumerate(edges):
        if edge.source in g and edge.target in g:
            g.add_edge(edge.source, edge.target, key=i, text=edge.text)
    return g


Check = Callable[["Subject"], str | None]


class Subject:
    """A graph under check: its parts as given, and the networkx graph."""

    def __init__(self, nodes: list, edges: list[GraphEdge], apis: list[str] | None,
                 kind_field: str) -> None:
        self.nodes = nodes
        self.edges = edges
        self.apis = apis
        self.g = build_graph(nodes, edges)
        self.kind_field = kind_field

    def kind(self, node_id: str) -> str:
        return self.g.nodes[node_id][self.kind_field]

    def of_kind(self, *kinds: str) -> list[str]:
        return [n for n in self.g if self.kind(n) in kinds]

    def roots(self) -> list[str]:
        return [n for n in self.g if self.g.in_degree(n) == 0]


# --- rules shared by both graphs ----------------------------------------------------------------


def unique_ids(s: Subject) -> str | None:
    seen: set[str] = set()
    for node in s.nodes:
        if not node.id:
            return "a node has no id"
        if node.id in seen:
            return f"two nodes are called {node.id!r}"
        seen.add(node.id)
    return None if s.nodes else "the graph has no node"


def known_endpoints(s: Subject) -> str | None:
    for edge in s.edges:
        for end in (edge.source, edge.target):
            if end not in s.g:
                return f"edge {edge.source} → {edge.target} names unknown node {end!r}"
    return None


def kinds_known(allowed: tuple[str, ...]) -> Check:
    def check(s: Subject) -> str | None:
        for n in s.g:
            if s.kind(n) not in allowed:
                return f"node {n} is of type {s.kind(n)!r} (allowed: {', '.join(allowed)})"
        return None
    return check


def concrete_text(s: Subject) -> str | None:
    for n in s.g:
        why = placeholder(s.g.nodes[n]["text"])
        if why:
            return f"node {n}: {why}"
    for u, v, data in s.g.edges(data=True):
        why = placeholder(data["text"]) if data["text"] else None
        if why:
            return f"edge {u} → {v}: {why}"
    return None


def known_apis(s: Subject) -> str | None:
    if s.apis is None:
        return None
    for n in s.of_kind("api"):
        name = s.g.nodes[n].get("api")
        if name not in s.apis:
            return (f"api node {n} calls {name!r}, which is not an API of the procedure "
                    f"({', '.join(s.apis) or 'none'})")
    return None


def api_outputs(s: Subject) -> str | None:
    for n in s.of_kind("api"):
        outputs: list[str] = []
        for _, v, data in s.g.out_edges(n, data=True):
            if not data["text"].strip():
                return f"edge {n} → {v} out of api node {n} carries no output"
            if data["text"].strip() in outputs:
                return f"api node {n} has the output {data['text']!r} twice"
            outputs.append(data["text"].strip())
    return None


def successors_of(kind: str, allowed: tuple[str, ...]) -> Check:
    def check(s: Subject) -> str | None:
        for n in s.of_kind(kind):
            for child in s.g.successors(n):
                if s.kind(child) not in allowed:
                    return f"{kind} node {n} is followed by {s.kind(child)} node {child}"
        return None
    check.__name__ = f"{kind}_successors"
    return check


# --- flowgraph rules ------------------------------------------------------------------------------


def single_start(s: Subject) -> str | None:
    starts = s.of_kind("start_message")
    if len(starts) != 1:
        return f"{len(starts)} start_message nodes ({', '.join(starts) or 'none'}); exactly one is needed"
    return None


def start_is_root(s: Subject) -> str | None:
    starts = s.of_kind("start_message")
    roots = s.roots()
    if starts and s.g.in_degree(starts[0]) > 0:
        return f"the start node {starts[0]} has an incoming edge"
    others = [r for r in roots if r not in starts]
    if others:
        return f"node {others[0]} has no incoming edge: the start node must be the only root"
    return None


def reachable_from_start(s: Subject) -> str | None:
    starts = s.of_kind("start_message")
    if not starts:
        return None
    seen = nx.descendants(s.g, starts[0]) | {starts[0]}
    lost = [n for n in s.g if n not in seen and s.g.in_degree(n)]  # another root: start-is-root says so
    return f"node {lost[0]} cannot be reached from the start" if lost else None


def message_edges(s: Subject) -> str | None:
    for n in s.of_kind("start_message", "message"):
        for _, v, data in s.g.out_edges(n, data=True):
            if not data["text"].strip():
                return f"edge {n} → {v} out of message node {n} carries no user message"
    return None


def end_leaves(s: Subject) -> str | None:
    for n in s.of_kind("end_message"):
        if s.g.out_degree(n):
            return f"end node {n} has outgoing edges"
    return None


def leaves_are_ends(s: Subject) -> str | None:
    for n in s.g:
        if s.g.out_degree(n) == 0 and s.kind(n) != "end_message":
            return f"{s.kind(n)} node {n} ends the flow: only end_message nodes may"
    return None


FLOWGRAPH_RULES: dict[str, Check] = {
    "unique-ids": unique_ids,
    "known-endpoints": known_endpoints,
    "node-types": kinds_known(FLOW_TYPES),
    "single-start": single_start,
    "start-is-root": start_is_root,
    "reachable": reachable_from_start,
    "concrete-text": concrete_text,
    "known-apis": known_apis,
    "message-edges": message_edges,
    "api-outputs": api_outputs,
    "end-leaves": end_leaves,
    "leaves-are-ends": leaves_are_ends,
}

# --- conversation graph rules -------------------------------------------------------------------


def single_root(s: Subject) -> str | None:
    roots = s.roots()
    if len(roots) != 1:
        return f"{len(roots)} nodes without an incoming edge ({', '.join(roots[:5]) or 'none'}); exactly one is needed"
    return None


def root_is_assistant(s: Subject) -> str | None:
    roots = s.roots()
    if len(roots) == 1 and s.kind(roots[0]) != "assistant":
        return f"the root {roots[0]} is a {s.kind(roots[0])} node: a conversation opens with the agent"
    return None


def acyclic(s: Subject) -> str | None:
    try:
        cycle = nx.find_cycle(s.g)
    except nx.NetworkXNoCycle:
        return None
    return "cycle " + " → ".join([str(e[0]) for e in cycle] + [str(cycle[0][0])])


def assistant_leaves(s: Subject) -> str | None:
    for n in s.g:
        if s.g.out_degree(n) == 0 and s.kind(n) != "assistant":
            return f"{s.kind(n)} node {n} is a leaf: conversations end with the agent"
    return None


CONVERSATION_RULES: dict[str, Check] = {
    "unique-ids": unique_ids,
    "known-endpoints": known_endpoints,
    "node-roles": kinds_known(CONVERSATION_ROLES),
    "single-root": single_root,
    "root-is-assistant": root_is_assistant,
    "acyclic": acyclic,
    "concrete-text": concrete_text,
    "known-apis": known_apis,
    "user-successors": successors_of("user", ("assistant", "api")),
    "assistant-successors": successors_of("assistant", ("user",)),
    "api-successors": successors_of("api", ("assistant", "api")),
    "api-outputs": api_outputs,
    "assistant-leaves": assistant_leaves,
}

# Rules that later rules rely on (a well-formed graph); when one of these breaks, the rest are
# not checked.
STRUCTURAL = ("unique-ids", "known-endpoints", "node-types", "node-roles")


def _check(rules: dict[str, Check], subject: Subject) -> list[Rejection]:
    broken = []
    for name, rule in rules.items():
        detail = rule(subject)
        if detail:
            broken.append(Rejection(rule=name, detail=detail))
            if name in STRUCTURAL:
                break
    return broken


def check_flowgraph(nodes: list[FlowNode], edges: list[GraphEdge],
                    apis: list[str] | None = None) -> list[Rejection]:
    """Every flowgraph rule the graph breaks (empty: valid). ``apis``: the names an api node may
    call (None: not checked)."""
    return _check(FLOWGRAPH_RULES, Subject(nodes, edges, apis, "type"))


def check_conversation_graph(nodes: list[ConversationNode], edges: list[GraphEdge],
                             apis: list[str] | None = None) -> list[Rejection]:
    """Every conversation-graph rule the graph breaks (empty: valid)."""
    return _check(CONVERSATION_RULES, Subject(nodes, edges, apis, "role"))
