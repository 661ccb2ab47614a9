"""compare-A-B.html: two runs side by side. The headline rates first (A, B, the difference with
its 95 % interval, coloured better or worse in the rate's own direction: a violation rate is
better lower), then the items whose outcome changed, each with both runs' transcripts side by
side from the first turn where they differ, then every rate, with Holm's adjustment for having
compared so many. One self-contained file, readable with scripts off (they only sort tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intellagent.metrics import Column
from intellagent_plugins.reporters.html_page import SCRIPT, cell, css_status, e, head, most_specific_view, sort_table
from intellagent_plugins.reporters.quality import replay_section

TRANSCRIPTS = 100
"""Changed items shown with their transcripts (the rest are listed): the page stays small."""

_RATE = Column(key="r", label="", kind="rate")


def _change(d: Any) -> str:
    """A delta's cell: ``+12 pp [+3, +21]``, coloured better/worse (faint when the interval
    holds 0), ✱ when the change stands after Holm's adjustment."""
    if d.delta is None:
        return "<td class=num data-v=0>–</td>"
    stands = d.holm is not None and d.holm < 0.05
    faint = "" if d.low > 0 or d.high < 0 else " faint"
    css = {"better": "better", "worse": "worse"}.get(d.direction, "")
    return (f"<td class='num {css}{faint}' data-v={d.delta}><b>{pp(d.delta)} pp</b> "
            f"<span class=muted>[{pp(d.low)}, {pp(d.high)}]</span>{' ✱' if stands else ''}</td>")


def pp(x: float) -> str:
    """A difference of rates in percentage points, signed (never ``-0``)."""
    return f"{round(x * 100) + 0:+d}"


def _group(d: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.group.items())


def _headline(comparison: Any) -> str:
    """A card for each run-wide rate (no group): A → B and the change."""
    cards = []
    for d in comparison.deltas:
        if d.group:
            continue
        a, b = (("–" if r.get("rate") is None else f"{r['rate']:.0%}") for r in (d.a, d.b))
        change = "no difference to read" if d.delta is None else \
            f"{pp(d.delta)} pp, 95 % CI [{pp(d.low)}, {pp(d.high)}]"
        css = {"better": " better", "worse": " worse"}.get(d.direction, "") if d.delta is not None else ""
        if css and d.low <= 0 <= d.high:
            css += " faint"  # the interval holds no change
        better = "higher" if d.better == "higher" else "lower"
        cards.append(f"<div class='card{css}'><div class=what>{e(d.title)}</div>"
                     f"<div class=big>{a} → {b}</div><div>{change}</div>"
                     f"<div class=muted>n {d.a.get('n', 0)} → {d.b.get('n', 0)}; {better} is better</div></div>")
    return "<section id=headline><h2>Headline</h2><div class=cards>" + "".join(cards) + "</div></section>"


def _holm_note(comparison: Any) -> str:
    tested = [d for d in comparison.deltas if d.p_value is not None]
    apart = [d for d in tested if d.low > 0 or d.high < 0]
    stand = [d for d in tested if d.holm is not None and d.holm < 0.05]
    return (f"<p id=holm class=note><b>{len(tested)} rates compared.</b> {len(apart)} of them have a 95 % "
            "interval that excludes no change; with this many intervals some would by chance alone "
            f"(about {len(tested) * 0.05:.1f} at 5 % each). After Holm's adjustment for {len(tested)} "
            f"comparisons, <b>{len(stand)}</b> change{'s' * (len(stand) != 1)} stand{'s' * (len(stand) == 1)} "
            "(marked ✱: adjusted p &lt; 0.05). A faint change's interval holds 0.</p>")


def _rates(comparison: Any) -> str:
    rows = []
    for d in comparison.deltas:
        p = "–" if d.p_value is None else f"{d.p_value:.3g} <span class=muted>({d.holm:.3g})</span>"
        rows.append(f"<tr><td>{e(d.title)}{'' if d.column == 'rate' else ' · ' + e(d.column)}</td>"
                    f"<td>{e(_group(d))}</td>{cell(_RATE, d.a)}{cell(_RATE, d.b)}{_change(d)}"
                    f"<td class=num data-v={d.holm if d.holm is not None else 2}>{p}</td>"
                    f"<td>{'lower' if d.better == 'lower' else 'higher'}</td></tr>")
    return ("<section id=deltas><h2>Every rate, A → B</h2>" + _holm_note(comparison)
            + sort_table(["metric", "group", "A", "B", "change (95 % CI)", "p (Holm)", "better"], rows, "rates")
            + "</section>")


def _pieces(data: Any, keys: set[str], views: list[Any]) -> dict[str, dict[str, list[str]]]:
    """For each of ``keys``, its HTML per step: a view's turns where it has them, else its HTML
    as one piece; the step's line (its status and note) first. One pass over the run."""
    found: dict[str, dict[str, list[str]]] = {key: {} for key in keys}
    for it in data.items(payload=True):
        if it.item not in found:
            continue
        value = data.decode(it.step, it.payload)
        line = (f"<div class=step>{e(it.step)} <span class={css_status(it.status)}>{e(it.status)}</span> "
                f"<span class=muted>{e(it.note[:300])}</span></div>")
        view = most_specific_view(value, views) if value is not None else None
        if view is not None and hasattr(view, "turns"):
            found[it.item][it.step] = [line, *view.turns(value, it)]
        else:
            found[it.item][it.step] = [line] + ([view.html(value, it)] if view is not None else [])
    return found


def side_by_side(a: dict[str, list[str]], b: dict[str, list[str]]) -> str:
    """Both runs' steps of an item next to each other; a step the same in both is folded, and a
    step's pieces (its line, then a dialog's turns) are shown from the first turn that differs,
    the equal turns before it folded."""
    parts = []
    for step in dict.fromkeys([*a, *b]):
        left, right = a.get(step, []), b.get(step, [])
        if left == right:
            parts.append(f"<details><summary>{e(step)}: the same in both runs</summary>"
                         + "".join(left) + "</details>")
            continue
        # piece 0 is the step's line (its status): each side keeps its own
        first = 1 + next((i for i, (x, y) in enumerate(zip(left[1:], right[1:])) if x != y),
                         min(len(left), len(right)) - 1)
        same = max(0, first - 1)
        folded = (f"<details class=same><summary>{e(step)}: {same} turn{'s' * (same != 1)} the same in both "
                  f"runs before the first difference</summary>{''.join(left[1:first])}</details>") if same else ""
        sides = "".join(f"<div class=side-{label.lower()}><b>{label}</b>{''.join(pieces[:1] + pieces[first:])}"
                        f"{'' if pieces else '<p class=muted>(none)</p>'}</div>"
                        for label, pieces in (("A", left), ("B", right)))
        parts.append(f"<div class=differs data-from={first}>{folded}<div class=sides>{sides}</div></div>")
    return "".join(parts)


def _changes(comparison: Any, runs: Any, views: list[Any]) -> str:
    changes = comparison.changes
    parts = [f"<section id=changes><h2>Items whose outcome changed ({len(changes)})</h2>"]
    if not changes:
        return parts[0] + "<p>None: every item in both runs ended the same.</p></section>"
    parts.append("<p>" + ", ".join(f"{v}× {e(k)}" for k, v in comparison.transitions.items()) + "</p>")
    shown = changes[:TRANSCRIPTS] if runs is not None else []
    rows = [f"<tr><td>{f'<a href=#c-{e(c.item)}>{e(c.item)}</a>' if i < len(shown) else e(c.item)}</td>"
            f"<td class={css_status(c.a)}>{e(c.a)}</td><td class={css_status(c.b)}>{e(c.b)}</td></tr>"
            for i, c in enumerate(changes)]
    parts.append("<div class=scroll>" + sort_table(["item", "A", "B"], rows, "changed") + "</div>")
    if len(changes) > len(shown) and runs is not None:
        parts.append(f"<p class=muted>The first {len(shown)} are shown below with their transcripts; "
                     "each run's own report has the others.</p>")
    keys = {c.item for c in shown}
    order = {step: i for i, step in enumerate(runs[1].plan.steps)} if shown else {}
    pieces_a, pieces_b = ({key: dict(sorted(steps.items(), key=lambda kv: order.get(kv[0], len(order))))
                           for key, steps in _pieces(data, keys, views).items()}
                          for data in runs) if shown else ({}, {})
    for c in shown:
        parts.append(f"<details class=change id=c-{e(c.item)} open><summary><b>{e(c.item)}</b> "
                     f"<span class={css_status(c.a)}>{e(c.a)}</span> → <span class={css_status(c.b)}>{e(c.b)}"
                     f"</span></summary>{side_by_side(pieces_a[c.item], pieces_b[c.item])}"
                     "</details>")
    return "".join(parts) + "</section>"


def write_comparison(comparison: Any, folder: Path, runs: Any, views: list[Any]) -> Path:
    """The page, into ``folder``; ``runs`` (A's data, B's data) gives the transcripts of the
    changed items (None: listed only)."""
    a, b = comparison.a, comparison.b
    path = folder / f"compare-{a.run_id}-{b.run_id}.html"
    parts = [head(f"IntellAgent comparison — {b.environment}"),
             "<nav class=toc><a href=#headline>headline</a><a href=#changes>changed items</a>"
             "<a href=#deltas>every rate</a><a href=#tested>what differs</a><a href=#shared>reused</a></nav>",
             f"<h1>IntellAgent comparison: {e(b.environment)}, A → B</h1>",
             "<table id=runs><tr><th></th><th>run</th><th>pipeline</th><th>agent</th><th>models</th></tr>"]
    for label, info in (("A", a), ("B", b)):
        models = ", ".join(f"{e(r)}: <code>{e(m)}</code>" for r, m in info.models.items())
        parts.append(f"<tr><th>{label}</th><td><code>{e(info.run_id)}</code></td><td>{e(info.pipeline)}</td>"
                     f"<td>{e(info.agent or '–')}</td><td>{models}</td></tr>")
    parts.append("</table>")
    parts.append(_headline(comparison))
    parts.append(_changes(comparison, runs, views))
    parts.append(_rates(comparison))
    parts.append("<section id=tested><h2>What differs in what was tested</h2>"
                 + ("<ul>" + "".join(f"<li>{e(line)}</li>" for line in comparison.differences) + "</ul>"
                    if comparison.differences else "" if comparison.unknown else
                    "<p>Nothing: the same environment, data, prompt, agent, models, pipeline and "
                    "seed.</p>")
                 + "".join(f"<p>{e(line)}</p>" for line in comparison.unknown)
                 + "</section>")
    parts.append("<section id=shared><h2>Items reused from A</h2><table><tr><th>step</th>"
                 "<th>identical</th><th>in both</th></tr>")
    parts += [f"<tr><td>{e(step)}</td><td class=num>{same}</td><td class=num>{n}</td></tr>"
              for step, (same, n) in comparison.shared.items()]
    parts.append("</table></section>" + replay_section(comparison) + SCRIPT + "</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
