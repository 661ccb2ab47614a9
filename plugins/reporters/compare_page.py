"""compare-A-B.html: two runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intellagent.metrics import Column
from intellagent_plugins.reporters.html_page import cell, css_status, e, head
from intellagent_plugins.reporters.quality import replay_section


def write_comparison(comparison: Any, folder: Path, runs: Any, views: list[Any]) -> Path:
    a, b = comparison.a, comparison.b
    path = folder / f"compare-{a.run_id}-{b.run_id}.html"
    parts = [head("IntellAgent comparison") + f"<h1>IntellAgent comparison: {e(b.environment)}</h1>",
             "<table id=runs><tr><th></th><th>run</th><th>pipeline</th><th>agent</th><th>models</th></tr>"]
    for label, info in (("A", a), ("B", b)):
        models = ", ".join(f"{e(r)}: <code>{e(m)}</code>" for r, m in info.models.items())
        parts.append(f"<tr><th>{label}</th><td><code>{e(info.run_id)}</code></td><td>{e(info.pipeline)}</td>"
                     f"<td>{e(info.agent or '–')}</td><td>{models}</td></tr>")
    parts.append("</table><section id=tested><h2>What differs in what was tested</h2>"
                 + ("<ul>" + "".join(f"<li>{e(line)}</li>" for line in comparison.differences) + "</ul>"
                    if comparison.differences else "<p>Nothing: the same environment, data, prompt, "
                                                   "agent, models, pipeline and seed.</p>")
                 + "</section>")
    parts.append("<section id=shared><h2>Items reused from A</h2><table><tr><th>step</th>"
                 "<th>identical</th><th>in both</th></tr>")
    parts += [f"<tr><td>{e(step)}</td><td class=num>{same}</td><td class=num>{n}</td></tr>"
              for step, (same, n) in comparison.shared.items()]
    parts.append("</table></section><section id=deltas><h2>Rates, A → B</h2><table><tr><th>metric</th>"
                 "<th>group</th><th>A</th><th>B</th><th>change (95% CI)</th></tr>")
    column = Column(key="r", label="", kind="rate")
    for d in comparison.deltas:
        group = ", ".join(f"{k} {v}" for k, v in d.group.items())
        change = "–" if d.delta is None else (f"<b>{d.delta * 100:+.0f} pp</b> "
                                              f"<span class=muted>[{d.low * 100:+.0f}, {d.high * 100:+.0f}]</span>")
        parts.append(f"<tr><td>{e(d.title)}</td><td>{e(group)}</td>{cell(column, d.a)}"
                     f"{cell(column, d.b)}<td class=num>{change}</td></tr>")
    parts.append(f"</table></section><section id=changes><h2>Items whose outcome changed "
                 f"({len(comparison.changes)})</h2><p>"
                 + ", ".join(f"{v}× {e(k)}" for k, v in comparison.transitions.items())
                 + "</p><table><tr><th>item</th><th>A</th><th>B</th></tr>")
    parts += [f"<tr><td>{e(c.item)}</td><td class={css_status(c.a)}>{e(c.a)}</td>"
              f"<td class={css_status(c.b)}>{e(c.b)}</td></tr>" for c in comparison.changes]
    parts.append("</table></section>" + replay_section(comparison) + "</body></html>\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
