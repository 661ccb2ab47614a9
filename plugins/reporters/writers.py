"""Report writers. The HTML report is one file with inline CSS and no script or external asset,
so it opens offline anywhere."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from intellagent.report import Rate, RunReport
from intellagent.stages import Stage


class Reporter(Stage):
    kind = "reporter"
    filename = ""

    def write(self, report: RunReport, folder: Path) -> Path:
        raise NotImplementedError


class JsonReporter(Reporter):
    name = "json"
    filename = "report.json"

    def write(self, report: RunReport, folder: Path) -> Path:
        path = folder / self.filename
        path.write_text(report.model_dump_json(indent=1), encoding="utf-8")
        return path


class CsvReporter(Reporter):
    name = "csv"
    filename = "report.csv"

    def write(self, report: RunReport, folder: Path) -> Path:
        path = folder / self.filename
        with path.open("w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["event", "status", "complexity", "policies", "categories", "exercised",
                          "violated", "stop_reason", "turns", "tool_calls", "db_changes", "reason"])
            for r in report.results:
                d, v = r.dialog, r.verdict
                out.writerow([
                    r.event.id, r.status, r.event.spec.complexity, " ".join(r.event.spec.policies),
                    "; ".join(sorted({report.graph.policy(p).category for p in r.event.spec.policies})),
                    " ".join(v.exercised) if v else "", " ".join(x.policy for x in v.violated) if v else "",
                    d.stop_reason if d else "", len(d.turns) if d else 0,
                    sum(len(t.tool_calls) for t in d.turns) if d else 0,
                    len((d.db_diff or {}).get("tables", {})) if d else 0,
                    (v.reason if v else r.event.error) or ""])
        return path


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d232a;padding:0 1rem}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f6f8}.num{text-align:right}.pass{color:#17803d}.fail{color:#b42318}.other{color:#9a6700}
.bar{display:inline-block;height:.7rem;background:#3b82f6;vertical-align:middle}
details{border:1px solid #ddd;border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}summary{cursor:pointer}
.turn{margin:.3rem 0;padding:.3rem .5rem;border-radius:4px}.user{background:#eef4ff}.assistant{background:#f3f4f6}
.critic{background:#fff7e6}.tool{font-family:monospace;font-size:12px;white-space:pre-wrap;color:#444}
.thought{color:#666;font-style:italic}code,pre{font-family:monospace;font-size:12px;white-space:pre-wrap}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _rate(rate: Rate) -> str:
    if rate.rate is None:
        return "<td class=num>–</td><td class=num>0</td><td></td>"
    width = int(rate.rate * 120)
    return (f"<td class=num>{rate.rate:.0%} <span class=bar style='width:{width}px'></span></td>"
            f"<td class=num>{rate.n}</td><td class=num>{rate.low:.0%}–{rate.high:.0%}</td>")


class HtmlReporter(Reporter):
    name = "html"
    filename = "report.html"

    def write(self, report: RunReport, folder: Path) -> Path:
        path = folder / self.filename
        path.write_text(self.render(report), encoding="utf-8")
        return path

    def render(self, report: RunReport) -> str:
        t = report.totals
        parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8>"
                 f"<title>IntellAgent report — {_e(report.environment)}</title><style>{CSS}</style>"
                 f"</head><body><h1>IntellAgent report: {_e(report.environment)}</h1>",
                 f"<p>Run <code>{_e(report.run_id)}</code>, agent <code>{_e(report.agent)}</code>, "
                 f"seed {report.seed}.</p>",
                 "<section id=summary><h2>Summary</h2><table>",
                 "<tr><th>events</th><th>pass</th><th>fail</th><th>infra-error</th>"
                 "<th>simulator-error</th><th>invalid events</th><th>success rate</th></tr>",
                 f"<tr><td class=num>{t.get('events', 0)}</td><td class=num>{t.get('pass', 0)}</td>"
                 f"<td class=num>{t.get('fail', 0)}</td><td class=num>{t.get('infra-error', 0) + t.get('event-infra-error', 0)}</td>"
                 f"<td class=num>{t.get('simulator-error', 0)}</td><td class=num>{t.get('event-invalid', 0)}</td>"
                 f"<td>{'–' if report.success.rate is None else f'{report.success.rate:.0%} ({report.success.low:.0%}–{report.success.high:.0%})'}</td></tr></table>",
                 "<p>Only pass and fail count in success rates; infrastructure and simulator errors "
                 "are reported separately.</p>"]
        if report.pass_hat_k:
            parts.append("<p id=pass-hat-k>" + ", ".join(f"pass^{k} = <b>{v:.3f}</b>"
                                                         for k, v in report.pass_hat_k.items()) + "</p>")
        parts.append("</section>")
        parts.append("<section id=by-challenge><h2>Success by challenge level</h2><table><tr>"
                     "<th>complexity</th><th>success</th><th>n</th><th>95% CI</th></tr>")
        parts += [f"<tr><td class=num>{k}</td>{_rate(v)}</tr>" for k, v in report.by_challenge.items()]
        parts.append("</table></section><section id=by-category><h2>Success by policy category</h2>"
                     "<table><tr><th>category</th><th>success</th><th>n</th><th>95% CI</th></tr>")
        parts += [f"<tr><td>{_e(k)}</td>{_rate(v)}</tr>" for k, v in report.by_category.items()]
        parts.append("</table></section><section id=policies><h2>Policies</h2><table><tr><th>id</th>"
                     "<th>policy</th><th>category</th><th>challenge</th><th>in events</th>"
                     "<th>exercised</th><th>violated</th><th>violation rate</th></tr>")
        for p in report.policies:
            rate = "–" if p.violation_rate is None else f"{p.violation_rate:.0%}"
            parts.append(f"<tr><td>{p.id}</td><td>{_e(p.text)}</td><td>{_e(p.category)}</td>"
                         f"<td class=num>{p.challenge}</td><td class=num>{p.in_events}</td>"
                         f"<td class=num>{p.exercised}</td><td class=num>{p.violated}</td>"
                         f"<td class=num>{rate}</td></tr>")
        parts.append(f"</table></section><section id=coverage><h2>Coverage</h2><p>Policies in at "
                     f"least one valid event: <b>{report.policy_coverage:.0%}</b>. Policy pairs of "
                     f"the graph (weight &gt; 0) met together: <b>{report.pair_coverage:.0%}</b>.</p>"
                     "</section><section id=cost><h2>Tokens and cost</h2><table><tr><th>stage</th>"
                     "<th>model</th><th>calls</th><th>cached</th><th>failed</th><th>prompt tokens</th>"
                     "<th>completion tokens</th><th>cost $</th></tr>")
        for c in report.cost:
            parts.append(f"<tr><td>{_e(c['stage'])}</td><td>{_e(c['model'])}</td><td class=num>{c['calls']}</td>"
                         f"<td class=num>{c['cached']}</td><td class=num>{c['failed']}</td>"
                         f"<td class=num>{c['prompt_tokens']}</td><td class=num>{c['completion_tokens']}</td>"
                         f"<td class=num>{c['cost_usd']:.4f}</td></tr>")
        parts.append("</table></section><section id=transcripts><h2>Transcripts</h2>")
        for r in report.results:
            parts.append(self._transcript(report, r))
        parts.append("</section></body></html>")
        return "\n".join(parts)

    def _transcript(self, report: RunReport, r) -> str:
        css = "pass" if r.status == "pass" else "fail" if r.status == "fail" else "other"
        head = (f"<details class=event id='{_e(r.event.id)}'><summary><b>{_e(r.event.id)}</b> "
                f"<span class={css}>{_e(r.status)}</span> — complexity {r.event.spec.complexity}, "
                f"policies {' '.join(r.event.spec.policies)}</summary>")
        body = [f"<p><b>Scenario.</b> {_e(r.event.scenario)}</p>"]
        if r.event.error:
            body.append(f"<p class=other>{_e(r.event.error)}</p>")
        if r.dialog:
            for turn in r.dialog.turns:
                body.append(f"<div class='turn {turn.role}'><b>{turn.role}</b>: {_e(turn.content or '')}")
                if turn.thought:
                    body.append(f"<div class=thought>thought: {_e(turn.thought)}</div>")
                for c in turn.tool_calls:
                    body.append(f"<div class=tool>{_e(c.name)}({_e(c.arguments)}) → {_e(c.output[:1500])}</div>")
                body.append("</div>")
            body.append(f"<p>Stop: <b>{_e(r.dialog.stop_reason)}</b> {_e(r.dialog.stop_explanation)}</p>")
            if r.dialog.db_diff:
                body.append(f"<p>Database changes:</p><pre>{_e(json.dumps(r.dialog.db_diff, indent=1)[:6000])}</pre>")
        if r.verdict:
            body.append(f"<p>Verdict: <b class={css}>{_e(r.verdict.status)}</b>. Exercised: "
                        f"{_e(' '.join(r.verdict.exercised) or '–')}. {_e(r.verdict.reason)}</p>")
        return head + "\n".join(body) + "</details>"
