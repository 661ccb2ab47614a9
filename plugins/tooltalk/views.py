"""How reports show ToolTalk's items: the conversation, and turn by turn which predictions
matched which ground-truth call and which were incorrect actions."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent_plugins.tooltalk.artefacts import ApiCall, Assessment, Conversation, Replay


def _e(text: object) -> str:
    return html.escape(str(text))


def _call(call: ApiCall, limit: int = 400) -> str:
    params = call.request.parameters
    args = "unreadable arguments" if params is None else \
        ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in params.items() if k != "session_token")
    if call.exception is not None:
        outcome = f"<span class=fail>✗ {_e(call.exception)}</span>"
    else:
        outcome = _e(json.dumps(call.response, ensure_ascii=False)[:limit])
    return f"<code>{_e(call.request.api_name)}({_e(args)})</code> → {outcome}"


class ConversationView:
    artefact = Conversation

    @staticmethod
    def html(conversation: Conversation, item: Any = None) -> str:
        meta = conversation.metadata
        user = conversation.user.get("username", "?")
        logged = "logged in" if "session_token" in conversation.user else "not logged in"
        parts = [f"<p><b>{_e(conversation.name)}</b> ({_e(conversation.set)}): user {_e(user)}, {logged}; "
                 f"{_e(meta.get('location'))}, {_e(meta.get('timestamp'))}; plugins "
                 f"{_e(', '.join(conversation.suites_used))}</p>"]
        if conversation.scenario:
            parts.append(f"<p class=muted>{_e(conversation.scenario)}</p>")
        return "\n".join(parts)


class ReplayView:
    artefact = Replay

    @staticmethod
    def html(replay: Replay, item: Any = None) -> str:
        calls = sum(len(t.predictions) for t in replay.turns)
        errors = [t for t in replay.turns if t.error]
        text = f"<p>{calls} call(s) in {len(replay.turns)} assistant turn(s)"
        text += "".join(f"; <span class=fail>turn {t.index}: {_e(t.error)}</span>" for t in errors)
        return text + "</p>"


class AssessmentView:
    """Per turn: the ground-truth calls (matched or missed), the agent's calls (which ground-truth
    call each matched, or why none, and whether it was an incorrect action) and both replies."""

    artefact = Assessment

    @staticmethod
    def html(result: Assessment, item: Any = None) -> str:
        m = result.metrics
        parts = ["<table><tr><th>predictions</th><th>ground truth</th><th>matches</th><th>actions</th>"
                 "<th>incorrect actions</th><th>precision</th><th>recall</th><th>action precision</th>"
                 "<th>incorrect-action rate</th><th>success</th><th>soft success</th></tr>"
                 f"<tr><td class=num>{m.predictions}</td><td class=num>{m.ground_truths}</td>"
                 f"<td class=num>{m.matches}</td><td class=num>{m.actions}</td><td class=num>{m.bad_actions}</td>"
                 f"<td class=num>{m.precision:.2f}</td><td class=num>{m.recall:.2f}</td>"
                 f"<td class=num>{m.action_precision:.2f}</td><td class=num>{m.bad_action_rate:.2f}</td>"
                 f"<td class={'pass' if m.success else 'fail'}>"
                 f"{'yes' if m.success else 'no: the agent crashed' if m.agent_error else 'no'}</td>"
                 f"<td class=num>{m.soft_success:.2f}</td></tr></table>"]
        truths = {i: t for i, t in enumerate(result.ground_truth)}
        for turn in result.turns:
            if turn.role == "user":
                parts.append(f"<div class='turn user'><b>user</b>: {_e(turn.text or '')}</div>")
                continue
            parts.append(f"<div class='turn assistant'><b>assistant turn {turn.index}</b>")
            rows = []
            for g, truth in truths.items():
                if truth.turn != turn.index:
                    continue
                by = (f"<span class=pass>✓ matched by prediction #{truth.prediction}</span>"
                      if truth.match else "<span class=fail>✗ missed</span>")
                rows.append(f"<tr><td>ground truth #{g}</td><td>{_call(truth.call)}</td><td>{by}</td></tr>")
            for p, pred in enumerate(result.predictions):
                if pred.turn != turn.index:
                    continue
                if pred.match:
                    verdict = f"<span class=pass>✓ = ground truth #{pred.ground_truth}</span>"
                else:
                    verdict = f"<span class=other>no match</span> <span class=muted>{_e(pred.why)}</span>"
                if pred.bad_action:
                    verdict += " <b class=fail>incorrect action</b>"
                elif pred.action and not pred.match:
                    verdict += " <span class=muted>(failed action: not counted as incorrect)</span>"
                rows.append(f"<tr><td>prediction #{p}</td><td>{_call(pred.call)}</td><td>{verdict}</td></tr>")
            if rows:
                parts.append("<table>" + "".join(rows) + "</table>")
            parts.append(f"<div>expected reply: {_e(turn.text or '')}</div>")
            reply = (f"<span class=fail>agent failed: {_e(turn.error)}</span>" if turn.error
                     else _e(turn.reply if turn.reply is not None else "(no reply)"))
            parts.append(f"<div>agent's reply: {reply}</div></div>")
        return "\n".join(parts)
