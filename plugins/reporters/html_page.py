"""What the HTML report and the compare page share: the page's head with its inline style and
script, metric cells (a rate with its interval, as text and a bar), and charts as inline SVG.
No external asset: a page opens offline anywhere, and reads in full with scripts off; the few
lines of script only sort tables and search the item list."""

from __future__ import annotations

import html
from typing import Any

from intellagent.metrics import Chart, Column, MetricResult

CSS = """
:root{--fg:#1d232a;--muted:#5b6470;--line:#d9dee4;--bg2:#f4f6f8;--pass:#17803d;--ok:#17803d;--fail:#b42318;
--other:#9a6700;--accent:#2563eb;--better:#dcfce7;--worse:#fee2e2}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;color:var(--fg);padding:.5rem 1.2rem 4rem}
h1{font-size:1.55rem;margin:.6rem 0 .3rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
h3{font-size:1rem;margin:1.2rem 0 .3rem}a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border:1px solid var(--line);padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:var(--bg2);font-weight:600}.num{text-align:right;white-space:nowrap}
.pass,.ok{color:var(--pass)}.fail{color:var(--fail)}.other{color:var(--other)}.muted{color:var(--muted)}
.notice{background:#fff4d6;border:1px solid #e0b84c;padding:.5rem .8rem}
.bar{display:inline-block;height:.7rem;background:#3b82f6;vertical-align:middle}
details{border:1px solid var(--line);border-radius:4px;margin:.4rem 0;padding:.3rem .6rem}summary{cursor:pointer}
.turn{margin:.3rem 0;padding:.3rem .5rem;border-radius:4px}.user{background:#eef4ff}.assistant{background:#f3f4f6}
.critic{background:#fff7e6}.tool{font-family:monospace;font-size:12px;white-space:pre-wrap;color:#444}
.thought{color:#666;font-style:italic}code,pre{font-family:monospace;font-size:12px;white-space:pre-wrap}
.step{margin:.6rem 0 .2rem;font-weight:600;border-top:1px dashed var(--line);padding-top:.3rem}
svg text{font:11px system-ui,sans-serif;fill:#333}svg a text{fill:var(--accent)}
nav.toc{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:.4rem 0;z-index:1;font-size:13px}
nav a{margin-right:.9rem}.cards{display:flex;flex-wrap:wrap;gap:.7rem;margin:.6rem 0}
.card{border:1px solid var(--line);border-radius:8px;padding:.5rem .8rem;min-width:10rem;flex:1 1 10rem}
.card .big{font-size:1.8rem;font-weight:650;line-height:1.2}.card .what{font-weight:600}
.held{color:var(--pass)}.broken{color:var(--fail);font-weight:600}
.wide{overflow-x:auto}table.rows td,table.rows th{font-size:12px;white-space:nowrap}
.only{display:none;background:#eff6ff;border:1px solid #bfdbfe;border-radius:4px;padding:.3rem .6rem}.only:target{display:block}
#index{border:1px solid var(--line);margin:.5rem 0}#index p{margin:0;padding:.2rem .5rem;border-top:1px solid var(--line);white-space:nowrap;overflow:hidden;text-overflow:ellipsis}#index p.head{background:var(--bg2);font-weight:600;border:0}
#index a,#index b{display:inline-block;width:7em}#index i,#index p.head b+b{font-style:normal;display:inline-block;width:10em}
.chunk{content-visibility:auto;contain-intrinsic-size:auto 15000px}.filtered .chunk,.only:target~#index .chunk{content-visibility:visible}
.transcript:has(> a:target){outline:2px solid var(--accent)}a.anchor{scroll-margin-top:4rem}
#search{margin:.5rem 0;display:flex;flex-wrap:wrap;gap:.5rem;align-items:center}#search input{flex:1 1 16rem;padding:.25rem .4rem}#search[hidden]{display:none}
.js table.sort th{cursor:pointer}th[data-dir=asc]::after{content:" ▲"}th[data-dir=desc]::after{content:" ▼"}
.better{background:var(--better)}.worse{background:var(--worse)}.faint{opacity:.55}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}.sides>div{min-width:0}
.card.better{background:var(--better)}.card.worse{background:var(--worse)}.card.faint{opacity:1}.card.faint.better{background:#f0fdf4}.card.faint.worse{background:#fef2f2}.note{background:var(--bg2);padding:.4rem .6rem;border-radius:4px}
.differs{margin:.4rem 0}.scroll{max-height:18rem;overflow:auto}.side-a,.side-b{border-top:3px solid var(--line);padding-top:.2rem}
"""

SCRIPT = """<script>
document.documentElement.classList.add('js');
for (const th of document.querySelectorAll('table.sort > thead th')) th.onclick = () => {
  const table = th.closest('table'), body = table.tBodies[0], i = th.cellIndex;
  const dir = th.dataset.dir === 'asc' ? -1 : 1;
  for (const h of th.parentNode.cells) delete h.dataset.dir;
  th.dataset.dir = dir > 0 ? 'asc' : 'desc';
  const key = row => { const c = row.cells[i], v = c ? (c.dataset.v ?? c.textContent.trim()) : '';
    return /^[-+]?\\d/.test(v) && !isNaN(parseFloat(v)) ? [0, parseFloat(v)] : [1, v.toLowerCase()]; };
  const rows = [...body.rows].map(r => [key(r), r]);
  rows.sort((a, b) => (a[0][0] - b[0][0] || (a[0][1] < b[0][1] ? -1 : a[0][1] > b[0][1] ? 1 : 0)) * dir);
  body.append(...rows.map(r => r[1]));
};
const bar = document.getElementById('search');
if (bar) {
  bar.hidden = false;
  const index = document.getElementById('index'), text = bar.querySelector('input');
  const items = [...index.querySelectorAll('.item')];
  const selects = [...bar.querySelectorAll('select')], shown = document.getElementById('shown');
  const apply = () => {
    const words = text.value.toLowerCase().split(/\\s+/).filter(Boolean);
    const need = selects.map(s => s.value).filter(Boolean);
    const only = location.hash.startsWith('#only-') ? location.hash.slice(6) : '';
    let n = 0;
    for (const it of items) {
      it.t ??= it.textContent.toLowerCase();
      const ok = need.every(c => it.classList.contains(c)) && words.every(w => it.t.includes(w));
      it.hidden = !ok;
      n += ok && (!only || it.classList.contains(only));
    }
    index.classList.toggle('filtered', n < items.length);  // the chunks laid out whole: hidden rows take no room
    shown.textContent = `${n} of ${items.length} shown`;
  };
  let linked = null;  // the select a link's value was put in
  const follow = () => {  // a link to the items of a value: its select shows it, until the next link
    const only = location.hash.startsWith('#only-') ? location.hash.slice(6) : '';
    if (linked) { linked.value = ''; linked = null; }
    for (const s of selects) if (only && [...s.options].some(o => o.value === only)) { s.value = only; linked = s; }
    apply();
  };
  let timer;
  text.oninput = () => { clearTimeout(timer); timer = setTimeout(apply, 120); };
  for (const s of selects) s.onchange = () => {
    linked = null;
    if (location.hash.startsWith('#only-')) location.hash = 'items';  // the link's filter gives way
    apply();
  };
  addEventListener('hashchange', follow);
  follow();
}
</script>"""


def e(text: object) -> str:
    return html.escape(str(text))


def most_specific_view(value: Any, views: list[Any]) -> Any:
    """The view of the value's own type, else of its nearest base type (a trajectory is shown
    by a trajectory view where there is one, else as a dialog), or None."""
    by_type = {}
    for view in views:
        by_type.setdefault(view.artefact, view)
    return next((by_type[t] for t in type(value).__mro__ if t in by_type), None)


def head(title: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
            f"<meta name=viewport content='width=device-width'><style>{CSS}</style></head><body>")


def css_status(status: str) -> str:
    return {"pass": "pass", "ok": "ok", "fail": "fail"}.get(status, "other")


def rate_text(value: Any) -> str:
    """A rate cell's value as ``40 % (31–50 %, n=96)``."""
    if not isinstance(value, dict) or value.get("rate") is None:
        return "–"
    return f"{value['rate']:.0%} ({value['low']:.0%}–{value['high']:.0%}, n={value['n']})"


def cell(column: Column, value: Any, link: str | None = None) -> str:
    """A metric's cell; ``data-v`` holds what a sort compares (a rate's value); ``link`` makes
    the value a link (to the items carrying it)."""
    if column.kind == "rate":
        if not isinstance(value, dict) or value.get("rate") is None:
            return "<td class=num data-v=-1>–</td>"
        rate, low, high = value["rate"], value["low"], value["high"]
        return (f"<td class=num data-v={rate}>{rate:.0%} <span class=bar style='width:{int(rate * 100)}px'></span>"
                f" <span class=muted>{low:.0%}–{high:.0%}, n={value['n']}</span></td>")
    if column.kind == "percent":
        return "<td class=num data-v=-1>–</td>" if value is None else f"<td class=num data-v={value}>{value:.1%}</td>"
    if column.kind == "number":
        return "<td class=num>–</td>" if value is None else f"<td class=num>{e(value)}</td>"
    text = e("" if value is None else value)
    return f"<td><a href='{e(link)}'>{text}</a></td>" if link else f"<td>{text}</td>"


def svg_chart(chart: Chart, result: MetricResult, width: int = 560, height: int = 240,
              links: dict[str, str] | None = None) -> str:
    """A line or bar chart of a metric's rows as inline SVG; a rate column draws its 95 %
    interval as whiskers; ``links`` (x value → href) makes the x labels links."""
    links = links or {}
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
             f"role='img' aria-label='{e(chart.title or result.title)}'>"]
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
        label = f"<text x='{cx:.1f}' y='{height - bottom + 16}' text-anchor='middle'>{e(x)}</text>"
        href = links.get(str(x))
        parts.append(f"<a href='{e(href)}'>{label}</a>" if href else label)
    if chart.kind == "line":
        parts.append("<polyline fill='none' stroke='#2563eb' stroke-width='2' points='"
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + "'/>")
        parts += [f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3.5' fill='#2563eb'/>" for x, y in xy]
    parts.append(f"<text x='{left + plot_w / 2:.1f}' y='{height - 4}' text-anchor='middle'>{e(chart.x)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def sort_table(headers: list[str], rows: list[str], table_id: str = "") -> str:
    """A table whose header sorts it (with scripts on): ``rows`` are its ``<tr>…</tr>``."""
    ident = f" id={table_id}" if table_id else ""
    return (f"<table class=sort{ident}><thead><tr>" + "".join(f"<th>{h}</th>" for h in headers)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
