"""Screenshots of a run report and a compare page for the docs (docs/images/report.png and
compare.png), taken in headless Chromium: two retail runs on mock/schema, the second with an
agent that breaks down after its first turn (tests/test_compare_page.py's), so the comparison has
items whose outcome changed from the second turn on.

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--report FILE --compare FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chromium import Page  # noqa: E402


def make_runs(workspace: Path) -> tuple[Path, Path]:
    """Two runs of retail (the steady agent, then the drifting one) and their comparison."""
    def intellagent(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "intellagent", *args], cwd=ROOT, text=True,
                              capture_output=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
        if done.returncode not in (0, 1):
            raise SystemExit(done.stdout + done.stderr)
        return done.stdout

    reports = []
    for agent in ("steady_agent", "drifting_agent"):
        out = intellagent("run", "retail", "--events", "30", "--workspace", str(workspace), "--quiet",
                          "--agent", "python", "--set", f"agent.with.callable=tests.test_compare_page:{agent}")
        reports.append(Path(re.search(r"report: (\S+report\.html)", out).group(1)))
    out = intellagent("compare", reports[0].parent.name, reports[1].parent.name, "--workspace", str(workspace))
    return reports[0], Path(re.search(r"report: (\S+\.html)", out).group(1))


async def shoot(page_path: Path, out: Path, profile: Path, height: int, at: str = "") -> None:
    """A PNG of the window, the page scrolled to ``at`` (a fragment) when given."""
    async with Page(page_path, profile, size=(1280, height)) as page:
        if at:
            await page.goto(page_path.as_uri() + at)
        await page.screenshot(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        report, compare = (args.report, args.compare) if args.report else make_runs(Path(tmp) / "ws")
        asyncio.run(shoot(report, args.out / "report.png", Path(tmp) / "p1", 1400))
        asyncio.run(shoot(compare, args.out / "compare.png", Path(tmp) / "p2", 1800))
    print(f"wrote {args.out / 'report.png'} and {args.out / 'compare.png'}")


if __name__ == "__main__":
    main()
