"""How reports show IntellAgent's artefacts: the event and the verdict (dialogs are shown by the
dialogue kit's view)."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent_plugins.intellagent.artefacts import Event, Verdict


def _e(text: object) -> str:
    return html.escape(str(text))


def _head(values: list[Any], limit: int) -> str:
    """The first ``limit`` characters of the values as JSON, one value a line (wrapped by the
    page's CSS): only the values shown are dumped, by the C encoder (indented JSON is written
    by pure Python, about 1 µs a character, and a flight's row alone is 5 KB)."""
    out, used = [], 0
    for value in values:
        if used >= limit:
            break
        out.append(json.dumps(value, default=str, ensure_ascii=False))
        used += len(out[-1]) + 1
    return "\n".join(out)[:limit]


class EventView:
    artefact = Event

    @staticmethod
    def html(event: Event, item: Any = None) -> str:
        parts = [f"<p><b>Scenario.</b> {_e(event.brief)}</p>"]
        if event.error:
            parts.append(f"<p class=other>{_e(event.error)}</p>")
        if event.policies:
            parts.append("<ul class=policies>" + "".join(
                f"<li><b>{_e(p.id)}</b> [{_e(p.category)}, challenge {p.challenge}] {_e(p.text)}"
                f"<br><i>expected:</i> {_e(p.expected)}</li>" for p in event.policies) + "</ul>")
        if event.user_knowledge:
            parts.append(f"<details><summary>What the user knew</summary><pre>"
                         f"{_e(event.user_knowledge[:4000])}</pre></details>")
        if event.rows:
            parts.append(f"<details><summary>The event's rows ({len(event.rows)})</summary><pre>"
                         f"{_e(_head([r.model_dump() for r in event.rows], 6000))}</pre></details>")
        return "\n".join(parts)


class VerdictView:
    artefact = Verdict

    @staticmethod
    def html(verdict: Verdict, item: Any = None) -> str:
        css = {"pass": "pass", "fail": "fail"}.get(verdict.status, "other")
        parts = [f"<p>Verdict: <b class={css}>{_e(verdict.status)}</b>"
                 + (f" (failed: <b class=fail>{_e(', '.join(verdict.failed))}</b>)" if verdict.failed else "")
                 + f" — {_e(verdict.reason)}"
                 + (f" Request completed: {'yes' if verdict.completed else 'no'}." if verdict.completed is not None else "")
                 + "</p>"]
        if verdict.confirmed_stop is not None and verdict.confirmed_stop != verdict.status:
            parts.append(f"<p>The user's confirmed stop (the method's own score): "
                         f"<b>{_e(verdict.confirmed_stop)}</b></p>")
        if verdict.judgements:
            parts.append("<table><tr><th>policy</th><th>exercised</th><th>violated</th><th>judge's reason</th></tr>"
                         + "".join(f"<tr><td>{_e(j.id)}</td><td>{'yes' if j.exercised else 'no'}</td>"
                                   f"<td class={'fail' if j.violated else 'pass'}>{'yes' if j.violated else 'no'}</td>"
                                   f"<td>{_e(j.reason)}</td></tr>" for j in verdict.judgements) + "</table>")
        if verdict.state.status != "none":
            parts.append(f"<p>End state: <b class={'pass' if verdict.state.status == 'pass' else 'fail'}>"
                         f"{_e(verdict.state.status)}</b></p><ul>" + "".join(
                             f"<li class={'pass' if r.ok else 'fail'}>{_e(r.expectation)}"
                             f"{': ' + _e(r.detail) if r.detail else ''}</li>" for r in verdict.state.results) + "</ul>")
        return "\n".join(parts)
