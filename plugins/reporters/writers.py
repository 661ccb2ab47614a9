"""Report writers for any pipeline: they render the run's funnel, every metric (tables, charts)
and every item (through the registered views, else as JSON). The HTML report has inline CSS,
SVG and a few lines of script (sorting tables, searching the items), no external asset, and
reads in full with scripts off. Its list of items has a row an item; their transcripts follow it
in a run of up to ``items_per_page`` items, else are on pages of that many under ``items/`` (at
10,000 events one file would be about 140 MB, which a browser takes tens of seconds to open).
Items are streamed from the store: only the list's rows (about 200 bytes an item) are held."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import quote

from pydantic import Field

from intellagent.metrics import MetricResult
from intellagent.model import StrictModel
from intellagent.report import Reporter, RunReport
from intellagent.results import RunData, RunItem
from intellagent_plugins.reporters.quality import calibration_section, mutation_section
from intellagent_plugins.reporters.compare_page import write_comparison as _write_comparison
from intellagent_plugins.reporters.html_page import SCRIPT, most_specific_view, sort_table, svg_chart
from intellagent_plugins.reporters.html_page import cell as _cell
from intellagent_plugins.reporters.html_page import css_status as _css_status
from intellagent_plugins.reporters.html_page import e as _e
from intellagent_plugins.reporters.html_page import head as _head
from intellagent_plugins.reporters.item_filters import ItemFilters


VALUES = "values.jsonl"
"""The file beside report.json holding every item's value, one JSON object a line."""


class JsonReporter(Reporter):
    """report.json: the run's identity, funnel, metrics, gates and cost, then every item with its
    step, status, note and scores. The items' values (events, transcripts, verdicts: most of a
    run's bytes) are streamed to values.jsonl beside it, one ``{"step", "item", "value"}`` a line
    in the order of ``items``, so report.json stays a few KB an item whatever the transcripts'
    length (:func:`read_report` joins them back)."""

    name = "json"
    filename = "report.json"

    def write(self, report, data, folder, views):
        path = folder / self.filename
        head = report.model_dump_json(indent=1)
        with path.open("w", encoding="utf-8") as fh, (folder / VALUES).open("w", encoding="utf-8") as values:
            fh.write(head[:head.rindex("}")].rstrip() + f',\n "values": "{VALUES}",\n "items": [')
            for i, item in enumerate(data.items(payload=True)):
                key = json.dumps({"step": item.step, "item": item.item}, ensure_ascii=False)
                fh.write(("," if i else "") + "\n  " + key[:-1] + ", " + json.dumps(
                    {"status": item.status, "note": item.note, "scores": [s.model_dump() for s in item.scores]},
                    ensure_ascii=False)[1:])
                # the stored payload is JSON text already: written as it is, not parsed and re-encoded
                values.write(key[:-1] + ', "value": ' + (item.payload or "null") + "}\n")
            fh.write("\n ]\n}\n")
        return path


def read_report(path: Path, values: bool = True) -> dict[str, Any]:
    """A report.json as a dict, each item with its ``value`` from the values.jsonl beside it
    (``values=False``: without them, reading report.json alone)."""
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    if values and "values" not in report:  # written before the values moved out: they are inline
        return report
    if values:
        with (Path(path).parent / report.get("values", VALUES)).open(encoding="utf-8") as fh:
            for item, line in zip(report["items"], fh, strict=True):
                entry = json.loads(line)
                if (entry["step"], entry["item"]) != (item["step"], item["item"]):
                    raise ValueError(f"{fh.name}: {entry['step']} {entry['item']} where report.json has "
                                     f"{item['step']} {item['item']}")
                item["value"] = entry["value"]
    return report


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


def _structured_row(info: Any) -> str:
    """The structured-output mode of each role (an ``auto`` probe's pick), when any was used."""
    if not info.structured:
        return ""
    return f"<tr><th>structured output</th><td>{_e(info.structured_text())}</td></tr>"


def tested_table(info: Any) -> str:
    """What was tested: run, pipeline, environment, agent, each role's model, seed, provenance."""
    models = ", ".join(f"{_e(r)}: <code>{_e(m)}</code>" for r, m in info.models.items()) or "–"
    return (f"<table id=run><tr><th>run</th><td><code>{_e(info.run_id)}</code> ({_e(info.status)})</td></tr>"
            f"<tr><th>pipeline</th><td>{_e(info.pipeline)} <span class=muted>{_e(info.description)}</span></td></tr>"
            f"<tr><th>environment</th><td>{_e(info.environment)} {_e(info.environment_version)}</td></tr>"
            f"<tr><th>agent under test</th><td>{_e(info.agent or '–')}</td></tr>"
            f"<tr><th>models</th><td>{models}</td></tr>{_structured_row(info)}"
            f"<tr><th>seed</th><td>{info.seed}</td></tr>" + _provenance_rows(info) + "</table>\n")


def headline_rates(report: RunReport) -> list[tuple[str, MetricResult]]:
    """The metrics that are one rate over the whole run (success, the method's own score, the
    end state …), in the pipeline's order: the first is the run's headline."""
    return [(name, m) for name, m in report.metrics.items()
            if {"rate", "low", "high", "n"} <= set(m.values) and not any(c.group for c in m.columns)]


class HtmlOptions(StrictModel):
    items_per_page: int = Field(
        default=500, ge=1, le=5_000, description="Items whose transcripts report.html shows itself "
        "(at most 5,000, about 70 MB); a run with more gets an index of its items there and their "
        "transcripts on pages of this many under items/.")


PAGES = "items"
CHUNK = 500
"""Rows of the list of items laid out together (the rest wait until scrolled near)."""
"""The folder of a large run's item pages, beside report.html."""


def _page(number: int) -> str:
    return f"{number:04d}.html"


def _anchor(key: str) -> str:
    """The id an item's transcript is found by (inside its ``<details>``, which a link to it opens)."""
    return f"i-{key}"


class HtmlReporter(Reporter):
    """report.html: for people. A headline (gates, the headline rate with its interval, the
    method's own score, cost, what was tested), the funnel, every metric with each policy,
    category or level linked to its items, and the list of items (a one-line summary each,
    searchable and filterable), their transcripts in the file up to ``items_per_page`` items,
    else on pages of that many under items/."""

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
        paged = sum(finals.values()) > self.per_page
        filters = ItemFilters(report, finals)
        # the transcripts first (on their pages, or into a scratch file for this one), the index
        # rows they give (summary, classes) after: every item is decoded once, streamed
        links: dict[str, str] = {}
        with tempfile.TemporaryFile("w+", encoding="utf-8", dir=folder) as inline:
            rows = self._write_items(report, data, views, filters, pages if paged else None, inline,
                                     sum(finals.values()), links)
            inline.seek(0)
            with path.open("w", encoding="utf-8") as fh:
                fh.writelines(self.render(report, filters, finals, rows, None if paged else inline, links))
        return path

    def render(self, report: RunReport, filters: ItemFilters, finals: Counter, rows: list[str],
               transcripts: Iterable[str] | None, links: dict[str, str] | None = None) -> Iterator[str]:
        """The page; ``links``: each item's transcript (on this page or another)."""
        info = report.info
        yield _head(f"IntellAgent report — {info.environment}")
        yield ("<nav class=toc><a href=#headline>headline</a><a href=#summary>funnel</a>"
               + "".join(f"<a href='#{_e(n)}'>{_e(n)}</a>" for n in report.metrics)
               + f"<a href=#cost>cost</a><a href=#items>items ({sum(finals.values())})</a></nav>")
        yield f"<h1>IntellAgent report: {_e(info.environment)}</h1>\n"
        yield "".join(f"<p class=notice id=notice><b>{_e(n)}</b></p>\n" for n in info.notices)
        yield self._headline(report, filters, finals)
        for line in report.shortfalls:
            yield f"<p class='notice shortfall'>{_e(line)}</p>"
        yield "<section id=summary><h2>Funnel</h2>"
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
        funnel = []
        for s in report.steps:
            statuses = ", ".join(f"<span class={_css_status(k)}>{v} {_e(k)}</span>"
                                 for k, v in sorted(s.statuses.items(), key=lambda kv: -kv[1]))
            notes = "<br>".join(f"{v}× {_e(k)}" for k, v in s.notes.items())
            each = f" (each {_e(s.each)})" if s.each else ""
            funnel.append(f"<tr><td>{_e(s.name)}{each}</td><td>{_e(s.use)}</td><td>{_e(s.kind)}</td>"
                          f"<td class=num>{s.items}</td><td>{statuses}</td><td>{notes}</td></tr>")
        yield sort_table(["step", "plugin", "kind", "items", "statuses", "why not ok (most common)"], funnel, "funnel")
        yield ("<p class=muted>A rate counts only the statuses its metric names as passed "
               "or failed (pass and fail; an agent's crash, agent-error, where the pipeline counts "
               "it against the agent); infrastructure errors, invalid items and other statuses are "
               "counted apart.</p></section>\n")
        for name, result in report.metrics.items():
            yield self._metric(name, result, filters)
        yield mutation_section(report) + calibration_section(report, (links or {}).get)
        yield ("<section id=cost><h2>Tokens and cost</h2><table class=sort><thead><tr><th>step</th><th>model</th>"
               "<th>calls</th><th>cached</th><th>failed</th><th>prompt tokens</th>"
               "<th title='prompt tokens the provider read from its prompt cache, priced at its cached "
               "rate'>of which from the prompt cache</th>"
               "<th>completion tokens</th><th>cost $</th></tr></thead><tbody>")
        for c in report.cost:
            yield (f"<tr><td>{_e(c['stage'])}</td><td>{_e(c['model'])}</td><td class=num>{c['calls']}</td>"
                   f"<td class=num>{c['cached']}</td><td class=num>{c['failed']}</td>"
                   f"<td class=num>{c['prompt_tokens']}</td><td class=num>{c.get('cached_tokens') or 0}</td>"
                   f"<td class=num>{c['completion_tokens']}</td>"
                   f"<td class=num>{c['cost_usd']:.4f}</td></tr>")
        yield "</tbody></table></section>\n"
        yield from self._index(filters, finals, rows, paged=transcripts is None)
        if transcripts is not None:
            yield "<h3>Transcripts</h3><div id=transcripts>"
            yield from transcripts
            yield "</div>"
        yield "</section>" + SCRIPT + "</body></html>\n"

    def _headline(self, report: RunReport, filters: ItemFilters, finals: Counter) -> str:
        """Gates, the headline rate (and every other run-wide rate, the method's own score among
        them) with its interval, the other headlines, cost, the items by outcome, what was tested."""
        info = report.info
        cards = []
        for i, (name, m) in enumerate(headline_rates(report)):
            v = m.values
            big = "–" if v["rate"] is None else f"{v['rate']:.0%}"
            interval = "nothing scored" if v["rate"] is None else \
                f"95 % CI {v['low']:.0%}–{v['high']:.0%}, {v.get('passed', '?')} of {v['n']}"
            cards.append(f"<div class=card{' id=headline-rate' if i == 0 else ''}><div class=big>{big}</div>"
                         f"<div class=what><a href='#{_e(name)}'>{_e(m.title)}</a></div>"
                         f"<div class=muted>{interval}</div></div>")
        cost = sum(c["cost_usd"] for c in report.cost)
        tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in report.cost)
        calls = sum(c["calls"] for c in report.cost)
        left = f"; {_e(info.budget_left)} left" if info.budget_left else ""
        if info.budget_refused:
            left += f"; the next call could cost {_e(info.budget_refused)}, more than was left"
        if note := info.cost_note():
            left += f"; {_e(note)}"
        cards.append(f"<div class=card id=headline-cost><div class=big>${cost:.4f}</div><div class=what>"
                     f"<a href=#cost>cost</a></div><div class=muted>{calls:,} calls, {tokens:,} tokens{left}</div></div>")
        if report.gates:
            gates = "".join(f"<li class={'muted' if not report.finished else 'held' if g.held else 'broken'}>"
                            f"{_e(g.line(report.finished))}</li>" for g in report.gates)
            gates = f"<div id=gates><b>Gates</b><ul>{gates}</ul></div>"
        else:
            gates = "<p id=gates class=muted>No gates (<code>--fail-under</code> or <code>gates:</code> add them).</p>"
        rates = {name for name, _ in headline_rates(report)}
        others = [m.headline for name, m in report.metrics.items() if m.headline and name not in rates]
        return ("<section id=headline><div class=cards>" + "".join(cards) + "</div>" + gates
                + f"<p>Items: {filters.status_links(finals) or 'none'}.</p>"
                + ("<p>" + "<br>".join(_e(h) for h in others) + "</p>" if others else "")
                + "<h2>What was tested</h2>" + tested_table(info) + "</section>\n")

    def _index(self, filters: ItemFilters, finals: Counter, rows: list[str], paged: bool) -> Iterator[str]:
        """The items, one row each (its status and one-line summary, linked to its transcript),
        with the search bar, and what each ``#only-…`` link shows."""
        total = sum(finals.values())
        where = (f"The transcripts are on pages of {self.per_page} items under <code>{PAGES}/</code>"
                 if paged else "The transcripts follow the list")
        yield (f"<section id=items><h2>Items</h2><p class=muted>{where}: each item's name links to "
               "its own. Follow a policy, category or level above, or a status below, to list its "
               f"items alone.</p><p>Show: <a href=#items>all ({total})</a>, {filters.status_links(finals)}</p>"
               f"<style>{filters.css()}</style>{filters.search_bar(total)}{filters.banners()}"
               "<div id=index><p class=head><b>item</b><b>status</b>summary\n")
        for start in range(0, len(rows), CHUNK):
            # a chunk's rows are laid out and drawn only near the window (content-visibility):
            # 10,000 rows open in a fraction of the time
            yield "<div class=chunk>" + "".join(rows[start:start + CHUNK]) + "</div>\n"
        yield "</div>"

    def _write_items(self, report: RunReport, data: RunData, views: list[Any], filters: ItemFilters,
                     pages: Path | None, inline: Any, total: int, links: dict[str, str]) -> list[str]:
        """Every item's transcript, in the index's order: on ``items/0001.html`` …,
        ``items_per_page`` a page (``pages``), else into ``inline``; returns the index's rows and
        puts each item's link in ``links``."""
        rows: list[str] = []
        groups = self._groups(data, payload=True)
        if pages is None:
            for group in groups:
                summary, body = self._item(data, group, views)
                links[group[0].item] = f"#{_anchor(group[0].item)}"
                rows.append(self._row(filters, group, summary, links[group[0].item]))
                inline.write(body)
            return rows
        pages.mkdir(parents=True)
        per_page, env = self.per_page, report.info.environment
        last = (total - 1) // per_page + 1
        for number in range(1, last + 1):
            first = (number - 1) * per_page
            shown = f"items {first + 1}–{min(first + per_page, total)} of {total}"
            with (pages / _page(number)).open("w", encoding="utf-8") as fh:
                fh.write(_head(f"IntellAgent report — {env} — {shown}")
                         + f"<h1>IntellAgent report: {_e(env)}, {shown}</h1>"
                         + self._nav(number, last) + "<section id=transcripts>")
                for group in itertools.islice(groups, per_page):
                    summary, body = self._item(data, group, views)
                    links[group[0].item] = f"{PAGES}/{_page(number)}#{_anchor(group[0].item)}"
                    rows.append(self._row(filters, group, summary, links[group[0].item]))
                    fh.write(body)
                fh.write("</section>" + self._nav(number, last) + "</body></html>\n")
        return rows

    @staticmethod
    def _row(filters: ItemFilters, group: list[RunItem], summary: str, href: str) -> str:
        """An item's row in the index: its classes (status, the linked labels of its scores), its
        name linked to its transcript, its status, its summary. Closing tags are left out (HTML
        allows it), and the status's colour comes from the row's class: at 10,000 items every byte a
        row is 10 KB of the file."""
        key, status = group[0].item, group[-1].status
        classes = " ".join(filters.of(status, [s for it in group for s in it.scores]))
        return f"<p class='item {classes}'><a href={quote(href, safe='/#')}>{_e(key)}</a><i>{_e(status)}</i>{_e(summary)}\n"

    def _nav(self, number: int, last_page: int) -> str:
        links = [f"<a href='../{self.filename}'>← the report</a>"]
        if number > 1:
            links.append(f"<a href='{_page(number - 1)}'>previous page</a>")
        if number < last_page:
            links.append(f"<a href='{_page(number + 1)}'>next page</a>")
        return f"<nav>{''.join(links)} <span class=muted>page {number} of {last_page}</span></nav>"

    def write_comparison(self, comparison: Any, folder: Path, runs: Any = None, views: list[Any] | None = None) -> Path:
        """compare-A-B.html: two runs side by side (``runs``: both runs' data, for the
        transcripts of the items whose outcome changed)."""
        return _write_comparison(comparison, folder, runs, views or [])

    def _metric(self, name: str, result: MetricResult, filters: ItemFilters) -> str:
        parts = [f"<section id='{_e(name)}' class=metric><h2>{_e(result.title)}</h2>"]
        if result.description:
            parts.append(f"<p class=muted>{_e(result.description)}</p>")
        for chart in result.charts:
            column = next((c for c in result.columns if c.key == chart.x and c.items_by), None)
            links = {str(r.get(chart.x)): filters.href(column.items_by, r.get(chart.x)) for r in result.rows} \
                if column else {}
            parts.append(svg_chart(chart, result, links={k: v for k, v in links.items() if v}))
        if result.rows:
            rows = ["<tr>" + "".join(_cell(c, row.get(c.key), c.items_by and filters.href(c.items_by, row.get(c.key)))
                                     for c in result.columns) + "</tr>" for row in result.rows]
            parts.append(sort_table([_e(c.label) for c in result.columns], rows))
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

    def _item(self, data: RunData, group: list[RunItem], views: list[Any]) -> tuple[str, str]:
        """An item's one-line summary (its steps' views' summaries, else its last note) and its
        transcript: every step's status, note, warnings and view."""
        status, key = group[-1].status, group[0].item
        body, summaries = [], []
        for it in group:
            value = data.decode(it.step, it.payload)
            view = most_specific_view(value, views) if value is not None else None
            summary = getattr(view, "summary", None)
            if summary is not None:
                summaries.append(summary(value, it))
            body.append(f"<div class=step>{_e(it.step)} <span class={_css_status(it.status)}>"
                        f"{_e(it.status)}</span> <span class=muted>{_e(it.note[:300])}</span></div>")
            body += [f"<p class=fail>⚠ {_e(w)}</p>" for w in it.warnings]
            body.append(self._view(it, value, view))
        line = " · ".join(s for s in summaries if s) or group[-1].note[:160]
        return line, (f"<details class=transcript data-status='{_e(status)}'><summary><b>{_e(key)}</b> "
                      f"<span class={_css_status(status)}>{_e(status)}</span> <span class=muted>{_e(line)}</span>"
                      f"</summary><a class=anchor id='{_e(_anchor(key))}'></a>" + "\n".join(body) + "</details>\n")

    @staticmethod
    def _view(item: RunItem, value: Any, view: Any) -> str:
        if value is None:
            return ""
        if view is not None:
            return view.html(value, item)
        text = json.dumps(json.loads(item.payload), indent=1, ensure_ascii=False)
        return f"<pre>{_e(text[:4000])}</pre>"
