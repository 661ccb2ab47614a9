"""Report sizes and opening time (issue 35's and 31's targets): a mock/schema run of airline of
each size, then its report.json per event (target ≤ 5 KB; the items' values are in values.jsonl
beside it), report.html (the index: target ≤ 2 MB at 10,000 events) and its largest item page,
and how long report.html takes to open in headless Chromium (navigation start to the first
frame after load, the median of --opens; target ≤ 2 s at 10,000 events).

    python bench/report_bench.py [--events 1000,10000] [--opens 5] [--workspace DIR]

With --workspace, a size already run there is resumed (every item reused) and its report
written anew, so the figures of a new report come without running the events again.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chromium import Page  # noqa: E402


def run(events: int, workspace: Path) -> tuple[Path, float]:
    """The report folder of an airline run of ``events`` events, and the wall time of the run."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "intellagent", "run", "airline", "--events", str(events),
                           "--workspace", str(workspace), "--quiet"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    html = next(line[8:] for line in done.stdout.splitlines() if line.endswith("report.html"))
    return Path(html).parent, time.perf_counter() - started


async def open_times(html: Path, opens: int, profile: Path) -> list[float]:
    times = []
    for i in range(opens):
        async with Page(html, profile / str(i)) as page:
            times.append(await page.shown_after() / 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1000,10000")
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for events in (int(n) for n in args.events.split(",")):
            workspace = (args.workspace or Path(tmp)) / f"ws-{events}"
            folder, wall = run(events, workspace)
            n = sum(1 for line in (folder / "values.jsonl").open() if '"step": "events"' in line[:40])
            json_kb = (folder / "report.json").stat().st_size / 1000
            pages = list((folder / "items").glob("*.html"))
            times = asyncio.run(open_times(folder / "report.html", args.opens, Path(tmp) / f"profile-{events}"))
            print(f"{events} events ({n} made; run {wall:.0f} s): report.json {json_kb / 1000:.2f} MB = "
                  f"{json_kb / max(n, 1):.2f} KB/event (target ≤ 5), values.jsonl "
                  f"{(folder / 'values.jsonl').stat().st_size / 1e6:.1f} MB; report.html "
                  f"{(folder / 'report.html').stat().st_size / 1e6:.2f} MB (target ≤ 2 at 10,000), "
                  f"{len(pages)} item pages of at most "
                  f"{max((p.stat().st_size for p in pages), default=0) / 1e6:.1f} MB; opens in "
                  f"{statistics.median(times):.2f} s (median of {len(times)}: "
                  f"{', '.join(f'{t:.2f}' for t in times)}; target ≤ 2 at 10,000)")


if __name__ == "__main__":
    main()
