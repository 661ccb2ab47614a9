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

pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="Chromium is not installed (.ci/run installs it)")


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
