"""The HTML report renders in headless Chromium, offline, with every section and transcript."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from intellagent.cli import cli

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
SECTIONS = ("summary", "funnel", "success", "by-challenge", "above-threshold", "by-tested", "by-category",
            "policies", "state", "coverage", "invalid-events", "cost", "items")

pytestmark = [pytest.mark.slow,  # renders in headless Chromium
              pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                 reason="Chromium is not installed (.ci/run installs it)")]


def render(path: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    assert CHROMIUM, "CI must have Chromium: .ci/run installs Debian's chromium package"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", *extra, path.as_uri()],
        capture_output=True, text=True, timeout=120)


def test_html_report_renders_with_every_section(runner, tmp_path):
    result = runner.invoke(cli, ["run", "retail", "--events", "12", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    html_path = Path(next(l[8:] for l in result.stdout.splitlines() if l.endswith("report.html")))
    source = html_path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", source), "must not load anything"
    assert "<script" not in source

    dom = render(html_path, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for section in SECTIONS:
        assert f'id="{section}"' in dom.stdout, section
    report = json.loads((html_path.parent / "report.json").read_text())
    assert dom.stdout.count('class="item"') == sum(report["outcomes"].values()) == 12
    assert "IntellAgent report: retail" in dom.stdout
    assert dom.stdout.count("<svg") == 2  # success by challenge level and above each level, inline
    assert dom.stdout.count("class=\"turn user\"") > 12  # transcripts through the dialog view

    shot = render(html_path, tmp_path, "--screenshot=" + str(tmp_path / "report.png"),
                  "--window-size=1200,1600")
    assert shot.returncode == 0 and (tmp_path / "report.png").stat().st_size > 10_000
    if os.environ.get("INTELLAGENT_KEEP_SCREENSHOT"):
        shutil.copy(tmp_path / "report.png", os.environ["INTELLAGENT_KEEP_SCREENSHOT"])


def test_a_run_larger_than_a_page_gets_an_index_and_item_pages(runner, tmp_path):
    """report.html lists every item, linked to its transcript on a page of ``items_per_page``
    items under items/; the pages render; a report written again drops pages it no longer has."""
    workspace = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--events", "12", "--workspace", str(workspace),
                                 "--set", "report=[{use: html, with: {items_per_page: 5}}, json]"])
    assert result.exit_code == 0, result.output
    html_path = Path(next(l[8:] for l in result.stdout.splitlines() if l.endswith("report.html")))
    folder = html_path.parent
    report = json.loads((folder / "report.json").read_text())
    keys = sorted({i["item"] for i in report["items"] if i["item"]})
    source = html_path.read_text()
    assert "<details class=item" not in source and "<script" not in source
    links = re.findall(r"<tr class=item data-status='([^']+)'><td><a href='items/(\d{4}\.html)#item-([^']+)'>", source)
    assert sorted(k for _, _, k in links) == keys and len(keys) == 12
    assert [page for _, page, _ in links] == ["0001.html"] * 5 + ["0002.html"] * 5 + ["0003.html"] * 2
    assert sorted(p.name for p in (folder / "items").iterdir()) == ["0001.html", "0002.html", "0003.html"]
    finals = {s: [st for st, _, _ in links].count(s) for s in {st for st, _, _ in links}}
    offered = dict(re.findall(r"<input type=radio name=show id=show-\d+> ([\w-]+) \((\d+)\)</label>", source))
    assert {s: int(n) for s, n in offered.items()} == finals == report["outcomes"]  # the filter: final statuses
    for status, page, key in links:  # each link finds its item, with the status the index shows
        assert f"<details class=item id='item-{key}' data-status='{status}'>" in (folder / "items" / page).read_text()

    dom = render(folder / "items" / "0002.html", tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="item"') == 5 and "class=\"turn user\"" in dom.stdout
    assert "page 2 of 3" in dom.stdout and 'href="0001.html"' in dom.stdout and 'href="0003.html"' in dom.stdout
    index = render(html_path, tmp_path, "--dump-dom")
    assert index.returncode == 0 and 'id="index"' in index.stdout and 'id="cost"' in index.stdout

    # written again, the pipeline's reporter keeps its options; with a larger page, one file again
    again = runner.invoke(cli, ["report", "latest", "--workspace", str(workspace), "--format", "html"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (folder / "items").iterdir()) == ["0001.html", "0002.html", "0003.html"]
    from intellagent.registry import load_registry
    from intellagent.report import load_run
    from intellagent.report import write_reports
    from intellagent.store import Store
    from intellagent_plugins.reporters.writers import HtmlOptions, HtmlReporter

    registry = load_registry()
    store = Store.for_workspace(workspace)
    plan, rebuilt, data = load_run(store, store.resolve_run("latest"), registry)
    write_reports(plan, rebuilt, data, workspace, registry, [HtmlReporter(HtmlOptions(items_per_page=12))],
                  folder=folder.name)
    assert not (folder / "items").exists()
    assert html_path.read_text().count("<details class=item") == 12
