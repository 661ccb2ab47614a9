"""How reports show ALMITA's artefacts: procedures with their APIs, graphs (with the rule that
rejected them), conversations, tests and verdicts."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent_plugins.almita.artefacts import (CheckedProcedure, Conversation, ConversationGraph,
                                                  Flowgraph, Prediction, Rejection, TestCase, TestVerdict)


def _e(text: object) -> str:
    return html.escape(str(text))


def _rejection(rejection: Rejection | None) -> str:
    return f"<p class=fail>Rejected by rule <b>{_e(rejection.rule)}</b>: {_e(rejection.detail)}</p>" \
        if rejection else ""


def _call(api: str | None, arguments: Any) -> str:
    return f"{_e(api)}({_e(json.dumps(arguments or {}, ensure_ascii=False))})"


class ProcedureView:
    artefact = CheckedProcedure

    @staticmethod
    def html(value: CheckedProcedure, item: Any = None) -> str:
        p = value.procedure
        apis = "".join(f"<li><b>{_e(a.name)}</b>: {_e(a.description)} <code>{_e(json.dumps(a.parameters))}</code>"
                       f" → {_e(a.output)}</li>" for a in p.apis or [])
        return (_rejection(value.rejection) + f"<p><b>{_e(p.intent_name)}</b> {_e(p.id)}"
                + (f" <i>({_e(p.source)})</i>" if p.source else "") + f"</p><pre>{_e(p.text)}</pre><ul>{apis}</ul>")


def _graph(nodes: list, edges: list, kind: str) -> str:
    rows = "".join(f"<tr><td>{_e(n.id)}</td><td>{_e(getattr(n, kind))}</td><td>{_e(n.api or '')}</td>"
                   f"<td>{_e(n.text)}</td></tr>" for n in nodes)
    links = "".join(f"<li>{_e(e.source)} → {_e(e.target)}{': ' + _e(e.text) if e.text else ''}</li>" for e in edges)
    return f"<table><tr><th>node</th><th>{kind}</th><th>api</th><th>text</th></tr>{rows}</table><ul>{links}</ul>"


class FlowgraphView:
    artefact = Flowgraph

    @staticmethod
    def html(value: Flowgraph, item: Any = None) -> str:
        return _rejection(value.rejection) + _graph(value.nodes, value.edges, "type")


class ConversationGraphView:
    artefact = ConversationGraph

    @staticmethod
    def html(value: ConversationGraph, item: Any = None) -> str:
        noise = f"<p>{value.noise_inserted} noise branches.</p>" if value.noise_inserted else ""
        return _rejection(value.rejection) + noise + _graph(value.nodes, value.edges, "role")


class ConversationView:
    artefact = Conversation

    @staticmethod
    def html(value: Conversation, item: Any = None) -> str:
        parts = [_rejection(value.rejection)]
        for m in value.messages:
            noise = f" <i class=muted>({_e(m.noise)})</i>" if m.noise else ""
            if m.role == "api":
                parts.append(f"<div class='turn tool'><b>api</b>: {_call(m.api, m.arguments)} → {_e(m.output)}</div>")
            else:
                parts.append(f"<div class='turn {m.role}'><b>{m.role}</b>: {_e(m.text)}{noise}</div>")
        return "\n".join(parts)


def _action(action: Any) -> str:
    if action is None:
        return "–"
    if action.kind == "api":
        return "call " + _call(action.api, action.arguments)
    return f"reply: {_e(action.text)}" if action.kind == "reply" else "nothing"


class TestCaseView:
    artefact = TestCase

    @staticmethod
    def html(value: TestCase, item: Any = None) -> str:
        return (f"<p>{len(value.context)} messages of context; expected: {_action(value.expected)}"
                + (" <i>(after noise)</i>" if value.after_noise else "") + "</p>")


class PredictionView:
    artefact = Prediction

    @staticmethod
    def html(value: Prediction, item: Any = None) -> str:
        return f"<p>{_action(value.action)}" + (f" <span class=fail>{_e(value.error)}</span>" if value.error else "") + "</p>"


class VerdictView:
    artefact = TestVerdict

    @staticmethod
    def html(value: TestVerdict, item: Any = None) -> str:
        flags = " ".join(f"{k}={'✓' if getattr(value, k) else '✗'}" for k in
                         ("reply_recall", "correct_reply", "api_recall", "correct_api", "correct_parameters"))
        sim = f" similarity {value.similarity} (threshold {value.threshold})" if value.similarity is not None else ""
        return (f"<p>expected {_action(value.expected_action)}<br>got {_action(value.predicted_action)}</p>"
                f"<p>{flags}{_e(sim)}</p>" + (f"<p>{_e(value.why)}</p>" if value.why else ""))
