"""How reports show the kit's artefacts: a dialog as a transcript, a state verdict."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.dialogue.state import StateVerdict


def _e(text: object) -> str:
    return html.escape(str(text))


class DialogView:
    artefact = Dialog

    @staticmethod
    def html(dialog: Dialog, item: Any = None) -> str:
        parts = []
        for turn in dialog.turns:
            unsent = "" if turn.delivered else " <i class=muted>(closing message, never sent to the agent)</i>"
            parts.append(f"<div class='turn {turn.role}'><b>{turn.role}</b>: {_e(turn.content or '')}{unsent}")
            if turn.thought:
                parts.append(f"<div class=thought>thought: {_e(turn.thought)}</div>")
            for c in turn.tool_calls:
                parts.append(f"<div class=tool>{_e(c.name)}({_e(c.arguments)}) → {_e(c.output[:1500])}</div>")
            parts.append("</div>")
        parts.append(f"<p>Stop: <b>{_e(dialog.stop_reason)}</b> {_e(dialog.stop_explanation)}"
                     + (f" — {_e(dialog.error)}" if dialog.error else "") + "</p>")
        if dialog.db_diff and dialog.db_diff.get("tables"):
            parts.append(f"<p>Database changes:</p><pre>"
                         f"{_e(json.dumps(dialog.db_diff, indent=1)[:6000])}</pre>")
        return "\n".join(parts)


class StateVerdictView:
    artefact = StateVerdict

    @staticmethod
    def html(verdict: StateVerdict, item: Any = None) -> str:
        css = {"pass": "pass", "fail": "fail"}.get(verdict.status, "other")
        parts = [f"<p>End state: <b class={css}>{_e(verdict.status)}</b>"
                 + (f" — {_e(verdict.reason)}" if verdict.reason else "") + "</p>"]
        if verdict.problems:
            parts.append("<ul>" + "".join(f"<li class=fail>{_e(p)}</li>" for p in verdict.problems) + "</ul>")
        return "\n".join(parts)
