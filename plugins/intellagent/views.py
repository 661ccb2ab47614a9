"""How reports show IntellAgent's artefacts: the event and the verdict (dialogs are shown by the
dialogue kit's view)."""

from __future__ import annotations

import html
from typing import Any

from intellagent_plugins.dialogue.views import ScenarioView, first_line
from intellagent_plugins.intellagent.artefacts import Event, Verdict


def _e(text: object) -> str:
    return html.escape(str(text))


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
        parts += ScenarioView.what_the_user_had(event, "The event's rows")
        return "\n".join(parts)

    @staticmethod
    def summary(event: Event, item: Any = None) -> str:
        """The scenario's first line (or why the event could not be made)."""
        return first_line(event.brief) or first_line(event.error or "", 80)


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

    @staticmethod
    def summary(verdict: Verdict, item: Any = None) -> str:
        """What failed, with the stop's reason and the violated policies:
        ``failed: stop (give-up), policy (P3, P7)``."""
        if verdict.status == "pass":
            return "passed"
        if verdict.status != "fail":
            return f"{verdict.status}: {first_line(verdict.reason, 80)}" if verdict.reason else verdict.status
        violated = ", ".join(dict.fromkeys(v.policy for v in verdict.violated))
        detail = {"policy": violated, "stop": verdict.stop}
        return "failed: " + ", ".join(f"{what} ({detail[what]})" if detail.get(what) else what
                                      for what in verdict.failed)
