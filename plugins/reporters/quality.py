"""The HTML sections on the test suite itself, each self-contained: what the mutants of the
agent showed (``intellagent mutate``) and how the judges agree with people's labels
(``intellagent calibrate``) in a run's report, once the run has them; where a replayed agent
departed from the recording (``intellagent replay``) in the comparison of the two runs."""

from __future__ import annotations

import html
import re
from typing import Any, Callable

from intellagent.metrics import Rate


def _e(text: object) -> str:
    return html.escape(str(text))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def mutation_section(report: Any) -> str:
    found = report.mutation
    if found is None:
        return ""
    parts = ["<section id=mutants><h2>Mutants: does the suite catch a broken agent?</h2>",
             f"<p><b>{_e(found.summary())}</b>. A mutant wraps the agent with a fault on the "
             "harness side; it <i>kills</i> an item that passes with the agent and fails with the "
             "fault. The kill rate's interval is Wilson's 95 %.</p>",
             "<table><tr><th>mutant</th><th>fault</th><th>killed</th><th>kill rate</th>"
             "<th>caught by</th><th>metrics that fell</th><th>killed items</th><th>survived, and why</th></tr>"]
    for result in found.mutants.values():
        rate = Rate.of(len(result.killed), result.n)
        caught = ", ".join(f"{_e(k)} ×{n}" for k, n in result.caught_by.items()) or "–"
        fell = ", ".join(f"{_e(k)} {_e(v)}" for k, v in result.metrics.items()) or "–"
        items = ", ".join(_e(i) for i in result.killed[:50]) + (" …" if len(result.killed) > 50 else "")
        why: dict[str, list[str]] = {}
        for key in result.survived:
            why.setdefault(result.why_survived.get(key, ""), []).append(key)
        for key in result.mutant_errors:
            why.setdefault("the mutant raised: not counted", []).append(key)
        survived = "<br>".join(f"{_e(reason or 'survived')}: <code>{', '.join(_e(i) for i in keys[:50])}"
                               f"{' …' if len(keys) > 50 else ''}</code>" for reason, keys in why.items()) or "–"
        css = " class=pass" if result.killed else "" if result.equivalent else " class=fail"
        parts.append(f"<tr><td{css}>{_e(result.mutant)}</td><td>{_e(result.description)}</td>"
                     f"<td class=num>{len(result.killed)}/{result.n}</td><td class=num>{_e(rate.text())}</td>"
                     f"<td>{caught}</td><td>{fell}</td><td><code>{items}</code></td><td>{survived}</td></tr>")
    parts.append("</table></section>\n")
    return "".join(parts)


def _share(value: float | None, low: float | None, high: float | None, k: int, n: int) -> str:
    if value is None:
        return "– <span class=muted>(0 of 0)</span>"
    return f"{_pct(value)} <span class=muted>{_pct(low)}–{_pct(high)}, {k} of {n}</span>"


def _keys(keys: list[str], link: Callable[[str], str | None], most: int = 50) -> str:
    """Item keys (``E0004`` or ``E0004/P3``), each linked to its item's transcript where it has one."""
    shown = []
    for key in keys[:most]:
        href = link(re.split(r"[/ ]", key, maxsplit=1)[0])  # E0004/P3, E0004 (simulator-error)
        shown.append(f"<a href='{_e(href)}'>{_e(key)}</a>" if href else _e(key))
    return ", ".join(shown) + (f" … and {len(keys) - most} more" if len(keys) > most else "") or "–"


def precision_recall_table(found: Any, link: Callable[[str], str | None]) -> str:
    """The judge's precision and recall on "violated", overall then per thing judged, the least
    reliable first, the unranked marked so."""
    if not found.overall.n:
        return ""
    parts = ["<h3>The judge's “violated”: precision and recall, least reliable first</h3>",
             f"<p class=muted>{_e(found.definitions)}.</p>",
             "<table><tr><th>rank</th><th>judged</th><th>n</th><th>precision</th><th>recall</th>"
             "<th>false alarms (the judge alone)</th><th>misses (people alone)</th><th>not ranked</th></tr>"]
    for name, r in [("overall", found.overall), *found.things.items()]:
        rank = str(r.rank) if r.rank else "" if name == "overall" else "–"
        precision = _share(r.precision, r.precision_low, r.precision_high, r.confusion.both, r.precision_n)
        recall = _share(r.recall, r.recall_low, r.recall_high, r.confusion.both, r.recall_n)
        parts.append(f"<tr><td class=num>{rank}</td><td>{_e(name)}</td><td class=num>{r.n}</td>"
                     f"<td class=num>{precision}</td><td class=num>{recall}</td>"
                     f"<td>{_keys(r.false_alarms, link)}</td><td>{_keys(r.misses, link)}</td>"
                     f"<td class=muted>{_e(r.unranked)}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def calibration_section(report: Any, link: Callable[[str], str | None] = lambda item: None) -> str:
    """How the judges agree with people's labels; ``link``: an item's transcript, where the
    report has one."""
    found = report.calibration
    if found is None:
        return ""
    parts = ["<section id=calibration><h2>Judges against people's labels</h2>",
             f"<p>{_e(found.summary())}</p><p class=muted>{_e(found.intervals)}</p>",
             f"<p class=muted>Left out of every figure, as no judge looked (the dialog broke before "
             f"one could): {_keys(found.left_out, link)}.</p>" if found.left_out else "",
             f"<p class=muted>Left out of the judge's figures, as people split evenly: "
             f"{_keys(found.ties, link)}.</p>" if found.ties else "",
             f"<p>{_e(found.people.text())}</p>" if found.people is not None else "",
             "<table><tr><th>group</th><th>n</th><th>agreement</th><th>Cohen's κ</th>"
             "<th>both say violated</th><th>only the judge</th><th>only people</th><th>neither</th></tr>"]
    for name, group in [("overall", found.overall), *found.groups.items()]:
        c = group.confusion
        kappa = "–" if group.kappa is None else (
            f"{group.kappa:.2f} <span class=muted>{_e(group.kappa_interval())}</span>")
        agreement = "–" if group.agreement is None else (
            f"{_pct(group.agreement)} <span class=muted>{_pct(group.agreement_low)}–"
            f"{_pct(group.agreement_high)}</span>")
        parts.append(f"<tr><td>{_e(name)}</td><td class=num>{group.n}</td><td class=num>{agreement}</td>"
                     f"<td class=num>{kappa}</td><td class=num>{c.both}</td><td class=num>{c.judge_only}</td>"
                     f"<td class=num>{c.people_only}</td><td class=num>{c.neither}</td></tr>")
    parts.append("</table>" + precision_recall_table(found.precision_recall, link) + "</section>\n")
    return "".join(parts)


def replay_section(comparison: Any) -> str:
    if not comparison.replayed:
        return ""
    followed = sum(1 for r in comparison.replayed if r.departed is None)
    parts = ["<section id=replayed><h2>Replayed dialogs</h2>",
             f"<p>B replayed A's dialogs against its agent: {followed} of {len(comparison.replayed)} "
             "followed the recording to the end; elsewhere the simulated user took over at the "
             "agent's first other answer.</p><table><tr><th>item</th><th>departed at agent turn</th>"
             "<th>what differed</th><th>A</th><th>B</th></tr>"]
    for r in comparison.replayed:
        parts.append(f"<tr><td>{_e(r.item)}</td><td class=num>{'–' if r.departed is None else r.departed}</td>"
                     f"<td>{_e(r.why)}</td><td>{_e(r.a)}</td><td>{_e(r.b)}</td></tr>")
    parts.append("</table></section>")
    return "".join(parts)
