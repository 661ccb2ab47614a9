"""The HTML report in headless Chromium, offline: every section and transcript with scripts off;
its links from a policy, category, level or status to the items behind it (CSS alone, and with
the script); the search bar by text, status and policy; sorting; item pages for a large run."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent_plugins.reporters.writers import read_report
from tests.chromium import CHROMIUM, Page

SECTIONS = ("headline", "gates", "run", "summary", "funnel", "success", "by-challenge", "above-threshold",
            "by-tested", "by-category", "policies", "state", "coverage", "invalid-events", "cost", "items",
            "index", "transcripts")

pytestmark = [pytest.mark.slow,  # renders in headless Chromium
              pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                 reason="Chromium is not installed (.ci/run installs it)")]


@pytest.fixture(scope="module")
def retail(tmp_path_factory) -> Path:
    """A 12-event retail run on mock/schema: its report.html."""
    from click.testing import CliRunner

    workspace = tmp_path_factory.mktemp("retail") / "ws"
    result = CliRunner().invoke(cli, ["run", "retail", "--events", "12", "--workspace", str(workspace)])
    assert result.exit_code == 0, result.output
    return Path(next(line[8:] for line in result.stdout.splitlines() if line.endswith("report.html")))


def items_of(report: dict, label: str, value: str) -> set[str]:
    """The items whose scores carry ``label`` = ``value`` (what a link to them must show)."""
    return {i["item"] for i in report["items"] for s in i["scores"]
            if value in (s["labels"].get(label) if isinstance(s["labels"].get(label), list)
                         else [s["labels"].get(label)])}


def test_the_report_reads_in_full_with_scripts_off(retail, tmp_path):
    source = retail.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", source), "must not load anything"
    report = read_report(retail.parent / "report.json")

    async def look() -> dict:
        async with Page(retail, tmp_path / "profile", javascript=False) as page:
            return {"ids": await page.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)"),
                    "rows": await page.evaluate("[...document.querySelectorAll('#index .item')]"
                                                ".filter(r => r.checkVisibility())"
                                                ".map(r => [r.firstChild.textContent, r.children[1].textContent, r.lastChild.textContent.trim()])"),
                    "search": await page.visible("#search"),
                    "cards": await page.visible("#headline .card"),
                    "turns": await page.evaluate("document.querySelectorAll('.turn.user').length"),
                    "event tables": await page.evaluate("document.querySelectorAll('details table.rows').length"),
                    "tested": await page.visible("#run th"),
                    "colours": await page.evaluate("Object.fromEntries([...document.querySelectorAll('#index .item')]"
                                                   ".map(r => [r.children[1].textContent, getComputedStyle(r.children[1]).color]))")}

    seen = asyncio.run(look())
    for section in SECTIONS:
        assert section in seen["ids"], section
    assert len(seen["rows"]) == sum(report["outcomes"].values()) == 12  # every item listed
    assert not seen["search"]  # the search bar needs the script: hidden without it
    # the headline: the success rate with its interval, the method's own score, cost
    assert re.fullmatch(r"\d+%Success95 % CI \d+%–\d+%, \d+ of \d+", seen["cards"][0])
    assert any("method's own score" in c for c in seen["cards"]) and any(c.startswith("$") for c in seen["cards"])
    assert {"pipeline", "environment", "agent under test", "models", "seed"} <= set(seen["tested"])
    assert seen["turns"] > 12  # transcripts through the dialog view
    assert seen["colours"]["fail"] == "rgb(180, 35, 24)" and len(set(seen["colours"].values())) == len(seen["colours"])
    assert seen["event tables"] >= 1 and '{"table"' not in source  # an event's rows as tables, not JSON
    events = {i["item"]: i["value"] for i in report["items"] if i["step"] == "events" and i["value"]}
    verdicts = {i["item"]: i["value"] for i in report["items"] if i["step"] == "verdicts" and i["value"]}
    for row in seen["rows"]:  # each item's line: its name, status, scenario's first line, what failed
        key, status, summary = row
        brief = (events.get(key) or {}).get("brief", "")
        assert summary.startswith(brief.splitlines()[0][:40]) if brief else summary
        assert ("failed: " in summary) == (status == "fail")
        if status == "fail":  # what failed: the stop with its reason, the violated policies
            verdict = verdicts[key]
            violated = ", ".join(dict.fromkeys(v["policy"] for v in verdict["violated"]))
            assert ("stop" not in verdict["failed"]) or f"stop ({verdict['stop']})" in summary
            assert ("policy" not in verdict["failed"]) or f"policy ({violated})" in summary


def test_a_policy_or_category_or_status_links_to_its_items_with_scripts_off_and_on(retail, tmp_path):
    report = read_report(retail.parent / "report.json")
    source = retail.read_text()
    policy = re.search(r"<td><a href='#only-(t[0-9a-f]+)'>(P\d+)</a></td>", source)
    category = re.search(r"<td><a href='#only-t[0-9a-f]+'>P\d+</a></td><td>[^<]*</td>"
                         r"<td><a href='#only-(t[0-9a-f]+)'>([^<]+)</a></td>", source)  # a policy's category
    assert policy and category
    wanted = {"policy": items_of(report, "policy", policy.group(2)),
              "category": items_of(report, "category", category.group(2))}
    finals = {}
    for item in report["items"]:
        finals[item["item"]] = item["status"]
    failed = {k for k, v in finals.items() if v == "fail"}
    assert wanted["policy"] and wanted["category"] and failed

    async def follow(javascript: bool) -> dict:
        async with Page(retail, tmp_path / f"profile-{javascript}", javascript=javascript) as page:
            shown = {}
            await page.click(f"a[href='#only-{policy.group(1)}']")
            shown["policy"] = await page.visible("#index .item a")
            shown["banner"] = await page.visible(".only")
            await page.click(f"#only-{policy.group(1)} a[href='#items']")  # "Show all"
            shown["all"] = await page.visible("#index .item a")
            await page.click(f"a[href='#only-{category.group(1)}']")
            shown["category"] = await page.visible("#index .item a")
            status = re.search(r"<a href=#only-(s\d+)><b>\d+ fail</b>", source).group(1)
            await page.click(f"#headline a[href='#only-{status}']")
            shown["fail"] = await page.visible("#index .item a")
            await page.click(f"#index a[href='#i-{sorted(failed)[0]}']")  # an item's transcript opens
            shown["open"] = await page.evaluate("[...document.querySelectorAll('details.transcript[open]')]"
                                                ".map(d => d.querySelector('summary b').textContent)")
            return shown

    for javascript in (False, True):
        shown = asyncio.run(follow(javascript))
        assert set(shown["policy"]) == wanted["policy"], javascript
        assert shown["banner"] == [f"Showing the {len(wanted['policy'])} item{'s' * (len(wanted['policy']) != 1)} "
                                   f"with policy {policy.group(2)}. Show all"]
        assert len(shown["all"]) == 12
        assert set(shown["category"]) == wanted["category"]
        assert set(shown["fail"]) == failed
        assert shown["open"] == [sorted(failed)[0]]


def test_the_search_bar_finds_items_by_text_status_and_policy_and_tables_sort(retail, tmp_path):
    report = read_report(retail.parent / "report.json")
    source = retail.read_text()
    events = {i["item"]: i["value"]["brief"] for i in report["items"] if i["step"] == "events" and i["value"]}
    key, brief = sorted(events.items())[3]
    word = max(brief.split(), key=lambda w: sum(w.lower() in b.lower() for b in events.values()) == 1 and len(w))
    having = {k for k, b in events.items() if word.lower() in b.lower()[:90]}
    policy_option = re.search(r"<option value=(t[0-9a-f]+)>(P\d+) \((\d+)\)</option>", source)
    fail_option = re.search(r"<option value=(s\d+)>fail \((\d+)\)</option>", source)

    async def search() -> dict:
        async with Page(retail, tmp_path / "profile") as page:
            seen = {"bar": await page.visible("#search")}
            await page.type("#search input", word)
            await asyncio.sleep(0.3)  # the search waits for a pause in typing
            seen["text"] = await page.visible("#index .item a")
            seen["count"] = await page.evaluate("document.getElementById('shown').textContent")
            await page.type("#search input", "")
            await asyncio.sleep(0.3)
            await page.evaluate(f"(s => {{ s.value = '{policy_option.group(1)}'; s.onchange(); }})"
                                "(document.querySelector('#search select[aria-label=policy]'))")
            seen["policy"] = await page.visible("#index .item a")
            await page.evaluate(f"(s => {{ s.value = '{fail_option.group(1)}'; s.onchange(); }})"
                                "(document.querySelector('#search select[aria-label=status]'))")
            seen["policy and fail"] = await page.visible("#index .item a")
            rates = ("[...document.querySelectorAll('#policies tbody tr')]"
                     ".map(tr => parseFloat(tr.cells[7].dataset.v))")
            await page.click("#policies th:nth-child(8)")  # the violation rate
            seen["ascending"] = await page.evaluate(rates)
            await page.click("#policies th:nth-child(8)")
            seen["descending"] = await page.evaluate(rates)
            return seen

    seen = asyncio.run(search())
    assert seen["bar"]  # shown by the script
    assert set(seen["text"]) == having and key in having
    assert seen["count"] == f"{len(having)} of 12 shown"
    with_policy = items_of(report, "policy", policy_option.group(2))
    assert set(seen["policy"]) == with_policy and len(with_policy) == int(policy_option.group(3))
    finals = {i["item"]: i["status"] for i in report["items"]}
    assert set(seen["policy and fail"]) == {k for k in with_policy if finals[k] == "fail"}
    assert len(set(seen["ascending"])) > 2  # the policies' violation rates sort by a click on the header
    assert seen["ascending"] == sorted(seen["ascending"]) and seen["descending"] == sorted(seen["ascending"])[::-1]


def test_a_run_larger_than_a_page_gets_an_index_and_item_pages(runner, tmp_path):
    """report.html lists every item, linked to its transcript on a page of ``items_per_page``
    items under items/; the pages render; a report written again drops pages it no longer has."""
    workspace = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "retail", "--events", "12", "--workspace", str(workspace),
                                 "--set", "report=[{use: html, with: {items_per_page: 5}}, json]"])
    assert result.exit_code == 0, result.output
    html_path = Path(next(l[8:] for l in result.stdout.splitlines() if l.endswith("report.html")))
    folder = html_path.parent
    report = read_report(folder / "report.json")
    keys = sorted({i["item"] for i in report["items"] if i["item"]})
    source = html_path.read_text()
    assert "<details class=transcript" not in source
    links = re.findall(r"<p class='item (s\d+)[^']*'><a href=items/(\d{4}\.html)#i-([^>]+)>", source)
    assert sorted(k for _, _, k in links) == keys and len(keys) == 12
    assert [page for _, page, _ in links] == ["0001.html"] * 5 + ["0002.html"] * 5 + ["0003.html"] * 2
    assert sorted(p.name for p in (folder / "items").iterdir()) == ["0001.html", "0002.html", "0003.html"]
    for _, page, key in links:  # each link finds its item's transcript
        assert f"id='i-{key}'" in (folder / "items" / page).read_text()

    async def look() -> dict:
        async with Page(folder / "items" / "0002.html", tmp_path / "profile", javascript=False) as page:
            seen = {"items": await page.evaluate("document.querySelectorAll('details.transcript').length"),
                    "turns": await page.evaluate("document.querySelectorAll('.turn.user').length"),
                    "nav": await page.visible("nav")}
            await page.goto(html_path.as_uri())
            await page.click("#index a[href$='#i-" + links[7][2] + "']")
            seen["followed"] = await page.evaluate("location.pathname.split('/').pop() + location.hash")
            seen["open"] = await page.evaluate("[...document.querySelectorAll('details.transcript[open]')]"
                                               ".map(d => d.querySelector('summary b').textContent)")
            return seen

    seen = asyncio.run(look())
    assert seen["items"] == 5 and seen["turns"] > 0
    assert "page 2 of 3" in seen["nav"][0]
    assert seen["followed"] == f"0002.html#i-{links[7][2]}" and seen["open"] == [links[7][2]]

    # written again, the pipeline's reporter keeps its options; with a larger page, one file again
    again = runner.invoke(cli, ["report", "latest", "--workspace", str(workspace), "--format", "html"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (folder / "items").iterdir()) == ["0001.html", "0002.html", "0003.html"]
    from intellagent.registry import load_registry
    from intellagent.report import load_run, write_reports
    from intellagent.store import Store
    from intellagent_plugins.reporters.writers import HtmlOptions, HtmlReporter

    registry = load_registry()
    store = Store.for_workspace(workspace)
    plan, rebuilt, data = load_run(store, store.resolve_run("latest"), registry)
    write_reports(plan, rebuilt, data, workspace, registry, [HtmlReporter(HtmlOptions(items_per_page=12))],
                  folder=folder.name)
    assert not (folder / "items").exists()
    assert html_path.read_text().count("<details class=transcript") == 12
