"""Report writers for any pipeline: they render the run's funnel, every metric (tables, charts)
and every item (through the registered views, else as JSON). The HTML report has inline CSS and
SVG, no script and no external asset, so it opens offline anywhere. A run of up to
``items_per_page`` items is one file; a larger one gets an index of its items in report.html and
their transcripts on pages of that many under ``items/`` (at 10,000 events one file would be
about 140 MB, which a browser takes tens of seconds to open). Items are streamed from the store,
never all held in memory."""

from __future__ import annotations

import csv
import html
import itertools
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from pydantic import Field

from intellagent.metrics import Chart, Column, MetricResult
from intellagent.model import StrictModel
from intellagent.report import Reporter, RunReport
from intellagent.results import RunData, RunItem
from intellagent_plugins.reporters.quality import calibration_section, mutation_section, replay_section


class JsonReporter(Reporter):
    """report.json: the run's identity, funnel, metrics and cost, then every item with its
    status, scores and value."""

    name = "json"
    filename = "report.json"

    def write(self, report, data, folder, views):
        path = folder / self.filename
        head = report.model_dump_json(indent=1)
        with path.open("w", encoding="utf-8") as fh:
            fh.write(head[:head.rindex("}")].rstrip() + ',\n "items": [')
            for i, item in enumerate(data.items(payload=True)):
                entry = json.dumps({"step": item.step, "item": item.item, "status": item.status,
                                    "note": item.note, "scores": [s.model_dump() for s in item.scores]},
                                   ensure_ascii=False)
                # the stored payload is JSON text already: written as it is, not parsed and re-encoded
                fh.write(("," if i else "") + "\n  " + entry[:-1] + ', "value": ' + (item.payload or "null") + "}")
            fh.write("\n ]\n}\n")
        return path


class CsvReporter(Reporter):
    """report.csv: one row per score of every item (an item without scores gets one row), so
    it loads straight into a data frame."""

    name = "csv"
    filename = "report.csv"

    def write(self, report, data, folder, views):
        path = folder / self.filename
        with path.open("w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["step", "item", "status", "note", "score", "score_status", "score_value",
                          "labels", "score_note"])
            for item in data.items():
                base = [item.step, item.item, item.status, item.note]
                if not item.scores:
                    out.writerow(base + ["", "", "", "", ""])
                for s in item.scores:
                    out.writerow(base + [s.name, s.status or "", "" if s.value is None else s.value,
                                         json.dumps(s.labels, ensure_ascii=False, sort_keys=True), s.note])
        return path


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1150px;color:#1d232a;padding:0 1rem}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f6f8}.num{text-align:right}.pass,.ok{color:#17803d}.fail{color:#b42318}.other{color:#9a6700}
.bar{display:inline-block;height:.7rem;background:#3b82f6;vertical-align:middle}
details{border:1px solid #ddd;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}summary{cursor:pointer}
.turn{margin:.3rem 0;padding:.3rem .5rem;border-radius:4px}.user{background:#eef4ff}.assistant{background:#f3f4f6}
.critic{background:#fff7e6}.tool{font-family:monospace;font-size:12px;white-space:pre-wrap;color:#444}
.thought{color:#666;font-style:italic}code,pre{font-family:monospace;font-size:12px;white-space:pre-wrap}
.muted{color:#666}.notice{background:#fff4d6;border:1px solid #e0b84c;padding:.5rem .8rem}.step{margin:.6rem 0 .2rem;font-weight:600;border-top:1px dashed #ddd;padding-top:.3rem}
svg text{font:11px system-ui,sans-serif;fill:#333}details:target{outline:2px solid #3b82f6}
nav{margin:.6rem 0}nav a{margin-right:1rem}
"""


def most_specific_view(value: Any, views: list[Any]) -> Any:
    """The view of the value's own type, else of its nearest base type (a trajectory is shown
    by a trajectory view where there is one, else as a dialog), or None."""
    by_type = {}
    for view in views:
        by_type.setdefault(view.artefact, view)
    return next((by_type[t] for t in type(value).__mro__ if t in by_type), None)


def _provenance_rows(info: Any) -> str:
    """What was tested, beyond the names: the agent's endpoint and identity, the files put in
    place of the environment's own, the content hashes, the models' endpoints, the version."""
    p = info.provenance
    if p is None:
        return "<tr><th>what was tested</th><td class=muted>not recorded for this run</td></tr>"
    rows = []
    if p.agent is not None:
        identity = p.agent.identity or "a black box (no version: its dialogs are not reused across runs)"
        rows.append(("agent", f"{_e(p.agent.use)} <code>{_e(p.agent.endpoint or '')}</code> — {_e(identity)}"))
        if p.agent.options:
            rows.append(("agent options", f"<code>{_e(json.dumps(p.agent.options, ensure_ascii=False))}</code>"))
    for what, ref in (("data", p.data), ("prompt", p.prompt)):
        if ref is not None:
            rows.append((f"{what} override", f"<code>{_e(ref.path)}</code> sha256 <code>{_e(ref.sha256[:16])}</code>"))
    rows.append(("content hashes", f"environment <code>{_e(p.environment_hash[:16])}</code>, pipeline "
                                   f"<code>{_e(p.pipeline_hash[:16])}</code>"))
    endpoints = [f"{_e(r)}: <code>{_e(m.base_url)}</code>" for r, m in p.models.items() if m.base_url]
    if endpoints:
        rows.append(("model endpoints", ", ".join(endpoints)))
    rows.append(("IntellAgent", _e(p.intellagent)))
    for step, sources in info.reused.items():
        rows.append((f"{step} reused", ", ".join(f"{n} from {_e(r)}" for r, n in sources.items())))
    return "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)


def _e(text: object) -> str:
    return html.escape(str(text))


def _structured_row(info: Any) -> str:
    """The structured-output mode of each role (an ``auto`` probe's pick), when any was used."""
    if not info.structured:
        return ""
    return f"<tr><th>structured output</th><td>{_e(info.structured_text())}</td></tr>"


def _css_status(status: str) -> str:
    return {"pass": "pass", "ok": "ok", "fail": "fail"}.get(status, "other")


def _cell(column: Column, value: Any) -> str:
    if column.kind == "rate":
        if not isinstance(value, dict) or value.get("rate") is None:
            return "<td class=num>–</td>"
        rate, low, high = value["rate"], value["low"], value["high"]
        return (f"<td class=num>{rate:.0%} <span class=bar style='width:{int(rate * 100)}px'></span>"
                f" <span class=muted>{low:.0%}–{high:.0%}, n={value['n']}</span></td>")
    if column.kind == "percent":
        return "<td class=num>–</td>" if value is None else f"<td class=num>{value:.1%}</td>"
    if column.kind == "number":
        return "<td class=num>–</td>" if value is None else f"<td class=num>{_e(value)}</td>"
    return f"<td>{_e('' if value is None else value)}</td>"


def svg_chart(chart: Chart, result: MetricResult, width: int = 560, height: int = 240) -> str:
    """A line or bar chart of a metric's rows as inline SVG; a rate column draws its 95 %
    interval as whiskers."""
    points = []
    for row in result.rows:
        y = row.get(chart.y)
        low = high = None
        if isinstance(y, dict):
            y, low, high = y.get("rate"), y.get("low"), y.get("high")
        if y is not None:
            points.append((row.get(chart.x), float(y), low, high))
    if not points:
        return ""
    top = max(1.0, max(p[1] if p[3] is None else p[3] for p in points))
    left, right, pad_top, bottom = 44, 16, 16, 34
    plot_w, plot_h = width - left - right, height - pad_top - bottom
    step = plot_w / max(1, len(points))
    scale = lambda v: pad_top + plot_h * (1 - v / top)  # noqa: E731
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"role='img' aria-label='{_e(chart.title or result.title)}'>"]
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        y = scale(top * frac)
        parts.append(f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#e5e7eb'/>"
                     f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>"
                     f"{top * frac:.0%}</text>" if top <= 1.0 else
                     f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#e5e7eb'/>"
                     f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{top * frac:.3g}</text>")
    xy = []
    for i, (x, y, low, high) in enumerate(points):
        cx = left + step * (i + 0.5)
        xy.append((cx, scale(y)))
        if chart.kind == "bar":
            parts.append(f"<rect x='{cx - step * 0.35:.1f}' y='{scale(y):.1f}' width='{step * 0.7:.1f}' "
                         f"height='{pad_top + plot_h - scale(y):.1f}' fill='#93c5fd'/>")
        if low is not None and high is not None:
            parts.append(f"<line x1='{cx:.1f}' x2='{cx:.1f}' y1='{scale(low):.1f}' y2='{scale(high):.1f}' "
                         "stroke='#64748b'/>")
        parts.append(f"<text x='{cx:.1f}' y='{height - bottom + 16}' text-anchor='middle'>{_e(x)}</text>")
    if chart.kind == "line":
        parts.append("<polyline fill='none' stroke='#2563eb' stroke-width='2' points='"
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + "'/>")
        parts += [f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3.5' fill='#2563eb'/>" for x, y in xy]
    parts.append(f"<text x='{left + plot_w / 2:.1f}' y='{height - 4}' text-anchor='middle'>{_e(chart.x)}</text>")
    parts.append("</svg>")
    return "".join(parts)


class HtmlOptions(StrictModel):
    items_per_page: int = Field(
        default=500, ge=1, le=5_000, description="Items whose transcripts report.html shows itself "
        "(at most 5,000, about 70 MB); a run with more gets an index of its items there and their "
        "transcripts on pages of this many under items/.")


PAGES = "items"
"""The folder of a large run's item pages, beside report.html."""


def _page(number: int) -> str:
    return f"{number:04d}.html"


class HtmlReporter(Reporter):
    """report.html: for people; one file up to ``items_per_page`` items, else with item pages."""

    name = "html"
    filename = "report.html"
    Config = HtmlOptions

    @property
    def per_page(self) -> int:
        return (self.config or HtmlOptions()).items_per_page

    def write(self, report, data, folder, views):
        path = folder / self.filename
        pages = folder / PAGES
        if pages.is_dir():  # a report written again: its pages are all written anew (or not at all)
            shutil.rmtree(pages)
        finals = Counter(group[-1].status for group in self._groups(data))  # each item's last status
        total = sum(finals.values())
        paged = total > self.per_page
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(self.render(report, data, views, finals, paged))
        if paged:
            self._write_pages(report, data, views, pages, finals)
        return path

    def render(self, report: RunReport, data: RunData, views: list[Any], finals: Counter,
               paged: bool) -> Iterator[str]:
        info = report.info
        yield self._head(f"IntellAgent report — {info.environment}") + \
            f"<h1>IntellAgent report: {_e(info.environment)}</h1>\n" + \
            "".join(f"<p class=notice id=notice><b>{_e(n)}</b></p>\n" for n in info.notices)
        models = ", ".join(f"{_e(r)}: <code>{_e(m)}</code>" for r, m in info.models.items()) or "–"
        yield (f"<table id=run><tr><th>run</th><td><code>{_e(info.run_id)}</code> ({_e(info.status)})</td></tr>"
               f"<tr><th>pipeline</th><td>{_e(info.pipeline)} <span class=muted>{_e(info.description)}</span></td></tr>"
               f"<tr><th>environment</th><td>{_e(info.environment)} {_e(info.environment_version)}</td></tr>"
               f"<tr><th>agent under test</th><td>{_e(info.agent or '–')}</td></tr>"
               f"<tr><th>models</th><td>{models}</td></tr>{_structured_row(info)}"
               f"<tr><th>seed</th><td>{info.seed}</td></tr>"
               + _provenance_rows(info) + "</table>\n")
        yield "<section id=summary><h2>Summary</h2>"
        if report.outcomes:
            yield ("<p>Items: " + ", ".join(f"<b class={_css_status(k)}>{v} {_e(k)}</b>"
                                            for k, v in report.outcomes.items()) + ".</p>")
        for line in report.headlines():
            yield f"<p>{_e(line)}</p>"
        for line in report.shortfalls:
            yield f"<p class='notice shortfall'>{_e(line)}</p>"
        degraded = report.degraded()
        if degraded:
            yield ("<div id=degraded class=fail><b>Degraded items:</b> "
                   + ", ".join(f"{n} {_e(step)}" for step, n in degraded.items())
                   + ". Each was made without a model call that failed (an infra error): this run used "
                     "it as it is, and the next run makes it again.</div>")
        warnings = [(s.name, w, n) for s in report.steps for w, n in s.warnings.items()]
        if warnings:
            yield ("<div id=warnings class=fail><b>Look at these:</b><ul>"
                   + "".join(f"<li>{n}× {_e(step)}: {_e(w)}</li>" for step, w, n in warnings) + "</ul></div>")
        yield ("<table id=funnel><tr><th>step</th><th>plugin</th><th>kind</th><th>items</th>"
               "<th>statuses</th><th>why not ok (most common)</th></tr>")
        for s in report.steps:
            statuses = ", ".join(f"<span class={_css_status(k)}>{v} {_e(k)}</span>"
                                 for k, v in sorted(s.statuses.items(), key=lambda kv: -kv[1]))
            notes = "<br>".join(f"{v}× {_e(k)}" for k, v in s.notes.items())
            each = f" (each {_e(s.each)})" if s.each else ""
            yield (f"<tr><td>{_e(s.name)}{each}</td><td>{_e(s.use)}</td><td>{_e(s.kind)}</td>"
                   f"<td class=num>{s.items}</td><td>{statuses}</td><td>{notes}</td></tr>")
        yield ("</table><p class=muted>A rate counts only the statuses its metric names as passed "
               "or failed (pass and fail; an agent's crash, agent-error, where the pipeline counts "
               "it against the agent); infrastructure errors, invalid items and other statuses are "
               "counted apart.</p></section>\n")
        for name, result in report.metrics.items():
            yield self._metric(name, result)
        yield mutation_section(report) + calibration_section(report)
        yield ("<section id=cost><h2>Tokens and cost</h2><table><tr><th>step</th><th>model</th>"
               "<th>calls</th><th>cached</th><th>failed</th><th>prompt tokens</th>"
               "<th>completion tokens</th><th>cost $</th></tr>")
        for c in report.cost:
            yield (f"<tr><td>{_e(c['stage'])}</td><td>{_e(c['model'])}</td><td class=num>{c['calls']}</td>"
                   f"<td class=num>{c['cached']}</td><td class=num>{c['failed']}</td>"
                   f"<td class=num>{c['prompt_tokens']}</td><td class=num>{c['completion_tokens']}</td>"
                   f"<td class=num>{c['cost_usd']:.4f}</td></tr>")
        yield "</table></section>\n<section id=items><h2>Items</h2>"
        yield self._filter(finals)
        if paged:
            yield from self._index(data)
        else:
            for group in self._groups(data, payload=True):
                yield self._item(data, group, views)
        yield "</section></body></html>\n"

    @staticmethod
    def _head(title: str) -> str:
        return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
                f"<style>{CSS}</style></head><body>")

    def _index(self, data: RunData) -> Iterator[str]:
        """One row per item: its final status, each step's status and the last note, linked to
        the item on its page."""
        per_page = self.per_page
        yield (f"<p class=muted>The transcripts are on pages of {per_page} items under "
               f"<code>{PAGES}/</code>; each item's name links to it.</p><table id=index><tr>"
               "<th>item</th><th>status</th><th>steps</th><th>note</th></tr>")
        for i, group in enumerate(self._groups(data)):
            key, last = group[0].item, group[-1]
            steps = " → ".join(f"{_e(it.step)} <span class={_css_status(it.status)}>{_e(it.status)}</span>"
                               for it in group)
            yield (f"<tr class=item data-status='{_e(last.status)}'><td><a href='{PAGES}/"
                   f"{_page(i // per_page + 1)}#item-{_e(quote(key))}'>{_e(key)}</a></td>"
                   f"<td class={_css_status(last.status)}>{_e(last.status)}</td><td>{steps}</td>"
                   f"<td class=muted>{_e(last.note[:200])}</td></tr>\n")
        yield "</table>"

    def _write_pages(self, report: RunReport, data: RunData, views: list[Any], pages: Path,
                     finals: Counter) -> None:
        """``items/0001.html`` …: the items' transcripts, ``items_per_page`` a page, in the
        index's order, written as the items stream from the store."""
        pages.mkdir(parents=True)
        per_page, env, total = self.per_page, report.info.environment, sum(finals.values())
        last = (total - 1) // per_page + 1
        groups = self._groups(data, payload=True)
        for number in range(1, last + 1):
            first = (number - 1) * per_page
            shown = f"items {first + 1}–{min(first + per_page, total)} of {total}"
            with (pages / _page(number)).open("w", encoding="utf-8") as fh:
                fh.write(self._head(f"IntellAgent report — {env} — {shown}")
                         + f"<h1>IntellAgent report: {_e(env)}, {shown}</h1>"
                         + self._nav(number, last) + "<section id=items>" + self._filter(finals))
                for group in itertools.islice(groups, per_page):
                    fh.write(self._item(data, group, views))
                fh.write("</section>" + self._nav(number, last) + "</body></html>\n")

    def _nav(self, number: int, last_page: int) -> str:
        links = [f"<a href='../{self.filename}'>← the report</a>"]
        if number > 1:
            links.append(f"<a href='{_page(number - 1)}'>previous page</a>")
        if number < last_page:
            links.append(f"<a href='{_page(number + 1)}'>next page</a>")
        return f"<nav>{''.join(links)} <span class=muted>page {number} of {last_page}</span></nav>"

    def write_comparison(self, comparison: Any, folder: Path) -> Path:
        """compare-A-B.html: two runs side by side."""
        a, b = comparison.a, comparison.b
        path = folder / f"compare-{a.run_id}-{b.run_id}.html"
        parts = [self._head("IntellAgent comparison") + f"<h1>IntellAgent comparison: {_e(b.environment)}</h1>",
                 "<table id=runs><tr><th></th><th>run</th><th>pipeline</th><th>agent</th><th>models</th></tr>"]
        for label, info in (("A", a), ("B", b)):
            models = ", ".join(f"{_e(r)}: <code>{_e(m)}</code>" for r, m in info.models.items())
            parts.append(f"<tr><th>{label}</th><td><code>{_e(info.run_id)}</code></td><td>{_e(info.pipeline)}</td>"
                         f"<td>{_e(info.agent or '–')}</td><td>{models}</td></tr>")
        parts.append("</table><section id=tested><h2>What differs in what was tested</h2>"
                     + ("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in comparison.differences) + "</ul>"
                        if comparison.differences else "<p>Nothing: the same environment, data, prompt, "
                                                       "agent, models, pipeline and seed.</p>")
                     + "</section>")
        parts.append("<section id=shared><h2>Items reused from A</h2><table><tr><th>step</th>"
                     "<th>identical</th><th>in both</th></tr>")
        parts += [f"<tr><td>{_e(step)}</td><td class=num>{same}</td><td class=num>{n}</td></tr>"
                  for step, (same, n) in comparison.shared.items()]
        parts.append("</table></section><section id=deltas><h2>Rates, A → B</h2><table><tr><th>metric</th>"
                     "<th>group</th><th>A</th><th>B</th><th>change (95% CI)</th></tr>")
        column = Column(key="r", label="", kind="rate")
        for d in comparison.deltas:
            group = ", ".join(f"{k} {v}" for k, v in d.group.items())
            change = "–" if d.delta is None else (f"<b>{d.delta * 100:+.0f} pp</b> "
                                                  f"<span class=muted>[{d.low * 100:+.0f}, {d.high * 100:+.0f}]</span>")
            parts.append(f"<tr><td>{_e(d.title)}</td><td>{_e(group)}</td>{_cell(column, d.a)}"
                         f"{_cell(column, d.b)}<td class=num>{change}</td></tr>")
        parts.append(f"</table></section><section id=changes><h2>Items whose outcome changed "
                     f"({len(comparison.changes)})</h2><p>"
                     + ", ".join(f"{v}× {_e(k)}" for k, v in comparison.transitions.items())
                     + "</p><table><tr><th>item</th><th>A</th><th>B</th></tr>")
        parts += [f"<tr><td>{_e(c.item)}</td><td class={_css_status(c.a)}>{_e(c.a)}</td>"
                  f"<td class={_css_status(c.b)}>{_e(c.b)}</td></tr>" for c in comparison.changes]
        parts.append("</table></section>" + replay_section(comparison) + "</body></html>\n")
        path.write_text("\n".join(parts), encoding="utf-8")
        return path

    def _filter(self, finals: Counter) -> str:
        """Radio buttons that show only the items of one final status (with the run's count of
        each): CSS alone (``:has``), so the report stays script-free."""
        statuses = sorted(finals)
        if len(statuses) < 2:
            return ""
        ids = {status: f"show-{i}" for i, status in enumerate(statuses)}
        rules = "".join(f"#items:has(#{ids[st]}:checked) .item:not([data-status='{_e(st)}'])"
                        "{display:none}" for st in statuses)
        buttons = "".join(f"<label><input type=radio name=show id={ids[st]}> {_e(st)} ({finals[st]})</label> "
                          for st in statuses)
        return (f"<style>{rules}</style><p class=filter>Show: <label><input type=radio name=show checked> all"
                f"</label> {buttons}</p>")

    def _metric(self, name: str, result: MetricResult) -> str:
        parts = [f"<section id='{_e(name)}' class=metric><h2>{_e(result.title)}</h2>"]
        if result.description:
            parts.append(f"<p class=muted>{_e(result.description)}</p>")
        for chart in result.charts:
            parts.append(svg_chart(chart, result))
        if result.rows:
            parts.append("<table><tr>" + "".join(f"<th>{_e(c.label)}</th>" for c in result.columns) + "</tr>")
            for row in result.rows:
                parts.append("<tr>" + "".join(_cell(c, row.get(c.key)) for c in result.columns) + "</tr>")
            parts.append("</table>")
        elif any(v not in (None, 0) for v in result.values.values()):
            parts.append("<p>" + ", ".join(f"{_e(k)} = <b>{_e(v)}</b>" for k, v in result.values.items()) + "</p>")
        else:
            parts.append("<p class=muted>Nothing to show in this run.</p>")
        parts.append("</section>\n")
        return "".join(parts)

    def _groups(self, data: RunData, payload: bool = False) -> Iterator[list[RunItem]]:
        """Each item's entries at every step, in plan order (once-steps are left out: their
        metrics show them)."""
        order = {name: i for i, name in enumerate(data.plan.steps)}
        group: list[RunItem] = []
        for item in data.items(payload=payload):
            if not item.item:
                continue
            if group and group[0].item != item.item:
                yield sorted(group, key=lambda it: order.get(it.step, 0))
                group = []
            group.append(item)
        if group:
            yield sorted(group, key=lambda it: order.get(it.step, 0))

    def _item(self, data: RunData, group: list[RunItem], views: list[Any]) -> str:
        status, key = group[-1].status, group[0].item
        body = []
        for it in group:
            body.append(f"<div class=step>{_e(it.step)} <span class={_css_status(it.status)}>"
                        f"{_e(it.status)}</span> <span class=muted>{_e(it.note[:300])}</span></div>")
            body += [f"<p class=fail>⚠ {_e(w)}</p>" for w in it.warnings]
            body.append(self._view(data, it, views))
        return (f"<details class=item id='item-{_e(key)}' data-status='{_e(status)}'><summary><b>{_e(key)}</b> "
                f"<span class={_css_status(status)}>{_e(status)}</span></summary>"
                + "\n".join(body) + "</details>\n")

    def _view(self, data: RunData, item: RunItem, views: list[Any]) -> str:
        if not item.payload or item.payload == "null":
            return ""
        value = data.decode(item.step, item.payload)
        view = most_specific_view(value, views)
        if view is not None:
            return view.html(value, item)
        text = json.dumps(json.loads(item.payload), indent=1, ensure_ascii=False)
        return f"<pre>{_e(text[:4000])}</pre>"
