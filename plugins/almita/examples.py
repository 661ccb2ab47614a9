"""The worked example the conversation-graph prompt shows the model (one-shot): a small
flowgraph and the conversation graph it becomes. Both keep every rule (a test checks)."""

from __future__ import annotations

import json

from intellagent_plugins.almita.artefacts import ConversationNode, FlowNode, GraphEdge

EXAMPLE_FLOWGRAPH = {
    "nodes": [
        FlowNode(id="n1", type="start_message", text="Hello! How can I help you today?"),
        FlowNode(id="n2", type="message", text="I can check that. What is your booking number?"),
        FlowNode(id="n3", type="api", api="get_booking", text="Look up the booking by its number."),
        FlowNode(id="n4", type="end_message", text="Your table for 4 is booked for Friday at 8 pm."),
        FlowNode(id="n5", type="end_message", text="I could not find that booking. Please check the "
                                                   "number in your confirmation email."),
    ],
    "edges": [
        GraphEdge(source="n1", target="n2", text="I want to check my restaurant booking."),
        GraphEdge(source="n2", target="n3", text="It is BK-2231."),
        GraphEdge(source="n3", target="n4", text="booking found: 4 people, Friday 8 pm"),
        GraphEdge(source="n3", target="n5", text="booking not found"),
    ],
}

EXAMPLE_GRAPH = {
    "nodes": [
        ConversationNode(id="a1", role="assistant", text="Hello! How can I help you today?"),
        ConversationNode(id="u1", role="user", text="I want to check my restaurant booking."),
        ConversationNode(id="a2", role="assistant", text="I can check that. What is your booking number?"),
        ConversationNode(id="u2", role="user", text="It is BK-2231."),
        ConversationNode(id="c1", role="api", api="get_booking", text="Look up booking BK-2231."),
        ConversationNode(id="a3", role="assistant", text="Your table for 4 is booked for Friday at 8 pm."),
        ConversationNode(id="a4", role="assistant", text="I could not find that booking. Please check "
                                                         "the number in your confirmation email."),
    ],
    "edges": [
        GraphEdge(source="a1", target="u1"), GraphEdge(source="u1", target="a2"),
        GraphEdge(source="a2", target="u2"), GraphEdge(source="u2", target="c1"),
        GraphEdge(source="c1", target="a3", text="booking found: 4 people, Friday 8 pm"),
        GraphEdge(source="c1", target="a4", text="booking not found"),
    ],
}


def graph_json(graph: dict) -> str:
    return json.dumps({"nodes": [n.model_dump(exclude_none=True, exclude={"noise"}) for n in graph["nodes"]],
                       "edges": [e.model_dump() for e in graph["edges"]]}, indent=1)
