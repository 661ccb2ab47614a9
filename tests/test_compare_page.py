"""The compare page: the headline rates and every rate side by side with the difference and its
interval, coloured in the rate's own direction; the items whose outcome changed first, each
with both transcripts side by side from the first turn where they differ; Holm's adjustment."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent.compare import RateDelta, holm_adjust, z_test
from intellagent_plugins.reporters.compare_page import _change
from intellagent_plugins.reporters.writers import read_report

GOOD = "Of course. Here is a hint: think about what the question asks first."


def steady_agent(messages, tools):
    return GOOD


def drifting_agent(messages, tools):
    """Answers as the steady agent on its first turn, then breaks down (a dialog that goes on
    past one turn ends with the agent's error instead)."""
    if any(m["role"] == "assistant" for m in messages):
        raise RuntimeError("lost the thread")
    return GOOD


def run(runner, ws: Path, agent: str) -> dict:
    result = runner.invoke(cli, ["run", "education", "--events", "16", "--workspace", str(ws), "--agent", "python",
                                 "--set", f"agent.with.callable=tests.test_compare_page:{agent}"])
    assert result.exit_code in (0, 1), result.output
    return read_report(Path(next(l[8:] for l in result.stdout.splitlines() if l.endswith("report.json"))))


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    from click.testing import CliRunner

    runner = CliRunner()
    ws = tmp_path_factory.mktemp("compare") / "ws"
    a, b = run(runner, ws, "steady_agent"), run(runner, ws, "drifting_agent")
    result = runner.invoke(cli, ["compare", a["info"]["run_id"], b["info"]["run_id"], "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    page = Path(next(l[8:] for l in result.stdout.splitlines() if l.endswith(".html")))
    return a, b, page.read_text()


def finals(report: dict) -> dict[str, str]:
    order = {s["name"]: i for i, s in enumerate(report["steps"])}
    last: dict[str, dict] = {}
    for item in report["items"]:
        if item["item"] and (item["item"] not in last or order[item["step"]] >= order[last[item["item"]]["step"]]):
            last[item["item"]] = item
    return {k: v["status"] for k, v in last.items()}


def test_changed_items_come_first_with_both_transcripts_from_the_first_turn_that_differs(compared):
    a, b, page = compared
    fa, fb = finals(a), finals(b)
    changed = sorted(k for k in fa if fa[k] != fb.get(k))
    assert changed, "the drifting agent should change some outcomes"
    assert page.index("id=headline") < page.index("id=changes") < page.index("id=deltas")
    assert f"Items whose outcome changed ({len(changed)})" in page
    listed = re.findall(r"<tr><td><a href=#c-([^>]+)>", page)
    assert listed == changed
    dialogs = {(r, i["item"]): i["value"] for r, run in (("a", a), ("b", b)) for i in run["items"]
               if i["step"] == "dialogs" and i["value"]}
    for key in changed:
        block = page[page.index(f"<details class=change id=c-{key} "):]
        block = block[:block.index("</details><details class=change") if "</details><details class=change" in block
                      else block.index("</section>")]
        turns_a, turns_b = dialogs[("a", key)]["turns"], dialogs[("b", key)]["turns"]
        same = next((i for i, (x, y) in enumerate(zip(turns_a, turns_b)) if x != y), min(len(turns_a), len(turns_b)))
        found = re.search(r"<div class=differs data-from=(\d+)>", block)
        assert found and int(found.group(1)) == same + 1  # the dialog's pieces: its line, then its turns
        if same:
            assert f"dialogs: {same} turn{'s' * (same != 1)} the same in both runs" in block
        side_a = block[block.index("<div class=side-a>"):block.index("<div class=side-b>")]
        side_b = block[block.index("<div class=side-b>"):]
        # each side shows its own turns from the first difference, none before it
        assert html.escape(turns_b[same]["content"] or "") in side_b if same < len(turns_b) else True
        assert html.escape(turns_a[same]["content"] or "") in side_a if same < len(turns_a) else True
        for status in (fa[key], fb[key]):  # each run's last step, with its own outcome
            assert re.search(rf"<div class=step>\w+ <span class=\w+>{status}</span>", block)


def test_every_rate_is_side_by_side_coloured_in_its_own_direction_with_holm(compared):
    a, b, page = compared
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class=num data-v=[^>]*>(.*?)</td>"
                      r"<td class=num data-v=[^>]*>(.*?)</td><td class='num ?([a-z ]*)' data-v=([-\d.e]+)>(.*?)</td>"
                      r"<td class=num data-v=[^>]*>(.*?)</td><td>(higher|lower)</td></tr>", page)
    assert len(rows) >= 10
    directions = set()
    for title, group, _, _, css, delta, change, holm_cell, better in rows:
        delta = float(delta)
        if abs(delta) >= 0.005:  # under half a point reads +0 pp: neither colour
            good = (delta > 0) == (better == "higher")
            assert css.split()[0] == ("better" if good else "worse"), (title, group, delta, better)
            directions.add((better, good))
        else:
            assert not css.replace("faint", "").strip()
        low, high = (float(x) for x in re.search(r"\[([-+]\d+), ([-+]\d+)\]", change).groups())
        assert ("faint" in css) == (low <= 0 <= high)
    assert any(b == "lower" for b, _ in directions)  # a violation rate: lower is better
    # the headline: each run-wide rate, A → B
    headline = page[page.index("id=headline"):page.index("id=changes")]
    for name in ("success", "confirmed-stop"):
        ra, rb = a["metrics"][name]["values"]["rate"], b["metrics"][name]["values"]["rate"]
        assert f"{ra:.0%} → {rb:.0%}" in headline
    note = re.search(r"<b>(\d+) rates compared.</b> (\d+) of them .*?<b>(\d+)</b> change", page)
    assert note and int(note.group(1)) == sum(1 for r in rows if r[7] != "–")
    assert int(note.group(3)) == page.count(" ✱</td>") <= int(note.group(2))


def test_holm_adjusts_as_the_textbook_does():
    """R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02."""
    assert [round(p, 10) for p in holm_adjust([0.01, 0.04, 0.03, 0.005])] == [0.03, 0.06, 0.06, 0.02]
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]
    # the z-test: 30/100 against 45/100, two-sided p of the pooled test (z = 2.19)
    assert round(z_test((30, 100), (45, 100)), 4) == 0.0285 and z_test((0, 5), (0, 7)) == 1.0


def test_a_violation_rate_that_falls_is_better():
    fell = RateDelta(metric="policies", title="Policies", column="violation_rate", better="lower",
                     a={"passed": 8, "n": 10}, b={"passed": 2, "n": 10}, delta=-0.6, low=-0.8, high=-0.2)
    rose = fell.model_copy(update={"delta": 0.6, "low": 0.2, "high": 0.8})
    assert fell.direction == "better" and "'num better'" in _change(fell)
    assert rose.direction == "worse" and "'num worse'" in _change(rose)
    success = fell.model_copy(update={"better": "higher"})
    assert success.direction == "worse"
