"""How reports show the kit's artefacts: a scenario (its rows as tables), a dialog as a
transcript, a state verdict. Besides ``html``, a view may give ``summary`` (one line of plain
text for the report's item list) and ``turns`` (the HTML in turn-sized pieces, for showing two
versions side by side from the first turn where they differ)."""

from __future__ import annotations

import html
import json
from typing import Any

from intellagent.environment import Row
from intellagent_plugins.dialogue.dialog import Dialog
from intellagent_plugins.dialogue.scenario import Scenario
from intellagent_plugins.dialogue.state import StateVerdict


def _e(text: object) -> str:
    return html.escape(str(text))


def first_line(text: str, limit: int = 90) -> str:
    """The first non-empty line of ``text``, cut at a word boundary to about ``limit`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[:limit]) + "…"


def _fill(value: Any, out: list[str], left: int) -> int:
    """Append ``value`` as readable text to ``out`` (a mapping as ``key: value; …``, a list comma
    separated) until ``left`` characters are used up; returns what is left (below 0: cut short),
    so a cell stops reading a large nested value once it has enough."""
    if isinstance(value, dict):
        for i, (key, inner) in enumerate(value.items()):
            piece = f"; {key}: " if i else f"{key}: "
            out.append(piece)
            left = _fill(inner, out, left - len(piece))
            if left < 0:
                return left
        return left
    if isinstance(value, list):
        out.append("[")
        left -= 1
        for i, inner in enumerate(value):
            if i:
                out.append(", ")
                left -= 2
            left = _fill(inner, out, left)
            if left < 0:
                return left
        out.append("]")
        return left - 1
    text = "" if value is None else str(value)
    out.append(text)
    return left - len(text)


def cell_text(value: Any, limit: int = 160) -> str:
    """A value as at most ``limit`` characters of text (… where cut)."""
    if not isinstance(value, (dict, list)):  # most cells: one piece
        text = "" if value is None else str(value)
        return text if len(text) <= limit else text[:limit] + "…"
    out: list[str] = []
    if _fill(value, out, limit) < 0:
        return "".join(out)[:limit] + "…"
    return "".join(out)


def rows_tables(rows: list[Row], limit: int = 40) -> str:
    """Rows as one table per database table: the key, then one column per field (nested values
    as ``key: value`` text); at most ``limit`` rows a table."""
    by_table: dict[str, list[Row]] = {}
    for row in rows:
        by_table.setdefault(row.table, []).append(row)
    parts = []
    for table, found in by_table.items():
        columns: dict[str, None] = {}
        for row in found[:limit]:
            columns.update(dict.fromkeys(row.record))
        head = "".join(f"<th>{_e(c)}</th>" for c in columns)
        body = "".join(f"<tr><td><code>{_e(row.key)}</code></td>"
                       + "".join(f"<td>{_e(cell_text(row.record.get(c)))}</td>" for c in columns) + "</tr>"
                       for row in found[:limit])
        more = f"<p class=muted>… and {len(found) - limit} more</p>" if len(found) > limit else ""
        parts.append(f"<p><b>{_e(table)}</b> ({len(found)})</p><div class=wide><table class=rows>"
                     f"<thead><tr><th>key</th>{head}</tr></thead><tbody>{body}</tbody></table></div>{more}")
    return "\n".join(parts)


class ScenarioView:
    artefact = Scenario

    @staticmethod
    def html(scenario: Scenario, item: Any = None) -> str:
        return "\n".join([f"<p><b>Scenario.</b> {_e(scenario.brief)}</p>",
                          *ScenarioView.what_the_user_had(scenario)])

    @staticmethod
    def what_the_user_had(scenario: Scenario, rows: str = "The scenario's rows") -> list[str]:
        """The folded parts a scenario's view ends with: what the user knew, its rows as tables."""
        parts = []
        if scenario.user_knowledge:
            parts.append(f"<details><summary>What the user knew</summary><pre>"
                         f"{_e(scenario.user_knowledge[:4000])}</pre></details>")
        if scenario.rows:
            parts.append(f"<details><summary>{rows} ({len(scenario.rows)})</summary>"
                         f"{rows_tables(scenario.rows)}</details>")
        return parts

    @staticmethod
    def summary(scenario: Scenario, item: Any = None) -> str:
        return first_line(scenario.brief)


class DialogView:
    artefact = Dialog

    @staticmethod
    def turns(dialog: Dialog, item: Any = None) -> list[str]:
        """Each turn's HTML, then how the dialog stopped."""
        pieces = []
        for turn in dialog.turns:
            unsent = "" if turn.delivered else " <i class=muted>(closing message, never sent to the agent)</i>"
            parts = [f"<div class='turn {turn.role}'><b>{turn.role}</b>: {_e(turn.content or '')}{unsent}"]
            if turn.thought:
                parts.append(f"<div class=thought>thought: {_e(turn.thought)}</div>")
            for c in turn.tool_calls:
                parts.append(f"<div class=tool>{_e(c.name)}({_e(c.arguments)}) → {_e(c.output[:1500])}</div>")
            parts.append("</div>")
            pieces.append("\n".join(parts))
        pieces.append(f"<p>Stop: <b>{_e(dialog.stop_reason)}</b> {_e(dialog.stop_explanation)}"
                      + (f" — {_e(dialog.error)}" if dialog.error else "") + "</p>")
        return pieces

    @staticmethod
    def html(dialog: Dialog, item: Any = None) -> str:
        parts = DialogView.turns(dialog, item)
        if dialog.db_diff and dialog.db_diff.get("tables"):
            parts.append(f"<p>Database changes:</p><pre>"
                         f"{_e(json.dumps(dialog.db_diff, indent=1)[:6000])}</pre>")
        return "\n".join(parts)

    @staticmethod
    def summary(dialog: Dialog, item: Any = None) -> str:
        return first_line(dialog.error, 80) if dialog.error else ""


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

    @staticmethod
    def summary(verdict: StateVerdict, item: Any = None) -> str:
        if verdict.status == "pass":
            return "end state as expected"
        return f"end state: {verdict.status}" + (f" — {first_line(verdict.reason, 80)}" if verdict.reason else "")
