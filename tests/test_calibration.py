"""Judges against people: agreement, Cohen's kappa (its standard error as statsmodels computes
it) and the confusion counts per category and overall, from a labels file in CSV or JSONL; shown
in the run's report; the labelling page works in Chromium and what it downloads calibrates."""

from __future__ import annotations

import asyncio
import csv
import html
import itertools
import json
import os
import random
import re
from pathlib import Path

import pytest

from intellagent.calibration import Agreement, Confusion, kappa_and_error
from intellagent.cli import cli
from intellagent.llm.errors import ProviderError
from intellagent.llm.fabricate import fabricate
from tests.chromium import CHROMIUM, Page
from tests.conftest import write_env
from intellagent_plugins.reporters.writers import read_report


def test_kappa_and_its_standard_error_are_those_of_statsmodels():
    """Reference values: statsmodels 0.15.0, ``cohens_kappa(table).kappa`` and ``.std_kappa``
    (the asymptotic standard error of Fleiss, Cohen & Everitt)."""
    for table, kappa, se in (([[20, 5], [10, 15]], 0.4, 0.12699606293110033),
                             ([[3, 7], [2, 40]], 0.3117647058823526, 0.16909124122385047),
                             ([[7, 1], [2, 10]], 0.6938775510204082, 0.1619349704928393)):
        found = kappa_and_error(Confusion(both=table[0][0], judge_only=table[0][1],
                                          people_only=table[1][0], neither=table[1][1]))
        assert found == pytest.approx((kappa, se), abs=1e-12)
    assert kappa_and_error(Confusion(neither=9)) == (None, 0.0)  # one class only: no kappa


@pytest.mark.parametrize("confusion", [Confusion(judge_only=2, neither=3),   # people: never violated
                                       Confusion(both=2, judge_only=3),    # the judge: always
                                       Confusion(both=1, people_only=4)])  # people: always
def test_kappa_has_no_interval_when_one_side_gives_one_answer_throughout(confusion):
    """Kappa is 0 there whatever the other side says; its standard error, 0, would read as a
    certain [0.00, 0.00]."""
    found = Agreement.of(confusion)
    assert found.kappa == 0.0 and found.kappa_low is None and found.kappa_high is None
    assert "κ 0.00 (interval undefined: " in found.text() and "gave one answer throughout)" in found.text()
    mixed = Agreement.of(Confusion(both=1, judge_only=2, people_only=1, neither=3))
    assert mixed.kappa_low < mixed.kappa < mixed.kappa_high


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """An IntellAgent run on the shop (mock judges), and every judgement it made."""
    from click.testing import CliRunner

    root = tmp_path_factory.mktemp("calibration")
    shop = write_env(root)
    ws = root / "ws"
    result = CliRunner().invoke(cli, ["run", str(shop), "--events", "8", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    report = read_report(next(ws.glob("runs/*/report.json")))
    rows = []  # (item, policy, judge says violated, category)
    for item in report["items"]:
        if item["step"] != "verdicts" or item["status"] not in ("pass", "fail", "agent-error", "not-exercised"):
            continue
        rows.append((item["item"], "", item["status"] in ("fail", "agent-error"), "(item outcome)"))
        for score in item["scores"]:
            if score["name"] == "policy":
                rows.append((item["item"], score["labels"]["policy"], score["status"] == "fail",
                             score["labels"]["category"]))
    assert len(rows) > 8 and any(r[2] for r in rows) and not all(r[2] for r in rows)
    return ws, report["info"]["run_id"], rows


ONLY_SEED_ORDERS = """

@row_validator("orders")
def only_the_seeds_orders(order, db):
    if order["order_id"] not in ("o1", "o2"):
        raise ValidationFailed("only the seed's orders")
"""


STOP_CHECKS = itertools.count()


def disputing_critic(request, response_model):
    """The critic role: every other stop check finds the user's stop wrong (with no feedback
    round left, the dialog ends simulator-error, never shown to the judge); the judge's findings
    fabricated from their schema, as mock/schema does."""
    if response_model.__name__ == "StopCheck":
        return {"correct": next(STOP_CHECKS) % 2 == 1, "feedback": "look again"}
    return fabricate(response_model.model_json_schema(), random.Random(request.key()))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A run on the shop whose events making a new order are invalid (never simulated, never
    judged), and where half the users' stops are disputed to the end (simulator-error): the
    items' final statuses and report entries, by item."""
    from click.testing import CliRunner

    root = tmp_path_factory.mktemp("mixed")
    shop = write_env(root)
    (shop / "validators.py").write_text((shop / "validators.py").read_text() + ONLY_SEED_ORDERS)
    ws = root / "ws"
    result = CliRunner().invoke(cli, ["run", str(shop), "--events", "8", "--seed", "1", "--workspace", str(ws),
                                      "--set", "steps.events.with.repairs=0", "--set",
                                      "steps.dialogs.with.max_feedback=0", "--set",
                                      "llm.roles.critic={model: mock/function, options: {function: "
                                      "'tests.test_calibration:disputing_critic'}}"])
    assert result.exit_code == 0, result.output
    report = read_report(next(ws.glob("runs/*/report.json")))
    final = {item["item"]: item for item in report["items"] if item["item"]}  # the last step's entry wins
    statuses = {key: item["status"] for key, item in final.items()}
    assert {"invalid", "simulator-error", "fail"} <= set(statuses.values()), statuses
    return ws, report["info"]["run_id"], statuses, final


def write_labels(path: Path, rows: list[tuple[str, str, bool]]) -> Path:
    if path.suffix == ".csv":
        with path.open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["item", "policy", "violated"])
            out.writerows([item, policy, str(violated).lower()] for item, policy, violated in rows)
    else:
        path.write_text("".join(json.dumps({"item": item, "policy": policy, "violated": violated}) + "\n"
                                for item, policy, violated in rows))
    return path


def calibrate(runner, ws: Path, labels: Path, *extra: str):
    return runner.invoke(cli, ["calibrate", "--labels", str(labels), "--workspace", str(ws), *extra])


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_agreement_kappa_and_confusion_follow_the_labels(runner, tmp_path, judged, suffix):
    ws, run_id, rows = judged
    flipped = {0, 3}  # people disagree with the judge on these rows
    people = [(item, policy, violated != (i in flipped)) for i, (item, policy, violated, _) in enumerate(rows)]
    result = calibrate(runner, ws, write_labels(tmp_path / f"labels{suffix}", people), run_id, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    n = len(rows)
    assert found["overall"]["n"] == n
    assert found["overall"]["agreement"] == round((n - len(flipped)) / n, 4)
    judge = [r[2] for r in rows]
    expected = {"both": sum(j and i not in flipped for i, j in enumerate(judge)),
                "judge_only": sum(j and i in flipped for i, j in enumerate(judge)),
                "people_only": sum(not j and i in flipped for i, j in enumerate(judge)),
                "neither": sum(not j and i not in flipped for i, j in enumerate(judge))}
    assert found["overall"]["confusion"] == expected
    kappa, se = kappa_and_error(Confusion(**expected))
    assert found["overall"]["kappa"] == round(kappa, 4)
    assert found["overall"]["kappa_low"] == round(max(-1, kappa - 1.959964 * se), 4)
    categories = {r[3] for r in rows}
    assert set(found["groups"]) == categories
    for category in categories:
        assert found["groups"][category]["n"] == sum(1 for r in rows if r[3] == category)
    assert "Wilson" in found["intervals"] and "Fleiss, Cohen & Everitt" in found["intervals"]


def test_full_agreement_is_kappa_one_and_the_report_shows_it(runner, tmp_path, judged):
    ws, run_id, rows = judged
    labels = write_labels(tmp_path / "labels.csv", [(item, policy, violated) for item, policy, violated, _ in rows])
    result = calibrate(runner, ws, labels, run_id)
    assert result.exit_code == 0, result.output
    assert "agreement 100% " in result.stdout and "κ 1.00" in result.stdout
    report = read_report((ws / "runs" / run_id / "report.json"))
    assert report["calibration"]["overall"]["kappa"] == 1.0 and report["calibration"]["overall"]["n"] == len(rows)
    page = (ws / "runs" / run_id / "report.html").read_text()
    assert "id=calibration" in page and "Judges against people" in page
    again = runner.invoke(cli, ["report", run_id, "--workspace", str(ws)])  # kept with the run
    assert again.exit_code == 0 and "id=calibration" in (ws / "runs" / run_id / "report.html").read_text()


def unanswering_judge(request, response_model):
    return {}  # fits no judgement: the verdict is invalid-output


def test_rows_the_judge_could_not_decide_are_left_out_and_named(runner, tmp_path, shop):
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--events", "2", "--workspace", str(ws),
                                 "--set", "steps.dialogs.with.stop_check=false", "--set",
                                 "llm.roles.critic={model: mock/function, options: {function: "
                                 "'tests.test_calibration:unanswering_judge'}}"])
    assert result.exit_code == 3, result.output  # the verdicts could not finish
    labels = write_labels(tmp_path / "l.csv", [("E0001", "", True), ("E0002", "", False)])
    result = calibrate(runner, ws, labels, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["not_judged"] == ["E0001", "E0002"] and found["overall"]["n"] == 0
    assert found["overall"]["kappa"] is None and found["rows"] == 2


@pytest.mark.parametrize("content,message", [
    ("item,policy,violated\nE0001,,maybe\n", "labels.csv:2: violated must be true or false, not 'maybe'"),
    ("item,policy,violated\nE0001,,true\nE9999,,false\n", "labels.csv:3: no item 'E9999' in run"),
    ("item,policy,violated\nE0001,P999,true\n", "labels.csv:2: item 'E0001' has no score for policy 'P999'"),
    ("item,rule,violated\nE0001,P1,true\n", "labels.csv:2: column 'rule' names nothing the run's judges score"),
    ("policy,violated\nP1,true\n", "labels.csv:2: no item"),
    ("", "labels.csv:1: the labels file is empty"),
    # one judgement twice, the same answer or not: it would weigh double (and narrow the intervals)
    ("item,policy,violated\nE0001,,true\nE0002,,true\nE0001,,false\n",
     "labels.csv:4: item 'E0001' (its outcome) is labelled already, at line 2"),
    ("item,policy,violated,labeller\nE0001,,true,ann\nE0001,,true,ann\n",
     "labels.csv:3: item 'E0001' (its outcome) is labelled already by labeller 'ann', at line 2"),
])
def test_bad_labels_are_one_line_naming_file_and_line(runner, tmp_path, judged, content, message):
    ws, run_id, _ = judged
    (tmp_path / "labels.csv").write_text(content)
    result = calibrate(runner, ws, tmp_path / "labels.csv", run_id)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1
    assert "Traceback" not in result.output


def test_a_run_without_subjects_calibrates_its_items_outcomes(runner, tmp_path, shop):
    """A τ-bench-like suite (state-check: one judgement per item): the labels file's subject
    column may be there, empty."""
    from tests.test_mutants import PIPELINE, briefs_plugin

    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE)
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(ws)],
                           obj={"plugins": (briefs_plugin(),)})
    assert result.exit_code == 0, result.output
    labels = write_labels(tmp_path / "l.csv", [("S1", "", True)])  # the state check passed it
    result = runner.invoke(cli, ["calibrate", "--labels", str(labels), "--workspace", str(ws), "--json"],
                           obj={"plugins": (briefs_plugin(),)})
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["overall"]["confusion"] == {"both": 0, "judge_only": 0, "people_only": 1, "neither": 0}
    assert list(found["groups"]) == ["(item outcome)"]


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="Chromium is not installed (.ci/run installs it)")
def test_the_labelling_page_hides_the_judge_until_answered_and_downloads_labels(runner, tmp_path, judged):
    ws, run_id, rows = judged
    out = tmp_path / "label.html"
    result = runner.invoke(cli, ["label", run_id, "--workspace", str(ws), "--out", str(out)])
    assert result.exit_code == 0, result.output
    source = out.read_text()
    assert "http://" not in source and "https://" not in source  # nothing loaded from anywhere
    downloads = tmp_path / "downloads"
    downloads.mkdir()

    async def label() -> dict:
        async with Page(out, tmp_path / "profile", downloads) as page:
            questions = await page.evaluate("[...document.querySelectorAll('.question')].map(q => "
                                            "({item: q.dataset.item, value: q.dataset.value, judge: q.dataset.judge, "
                                            "hidden: q.querySelector('.judge').hidden, shown: "
                                            "q.querySelector('.judge').offsetParent !== null}))")
            transcripts = await page.evaluate("document.querySelectorAll('.turn.user').length")
            # answer every question as the judge did, but the first
            await page.evaluate("document.querySelectorAll('.question').forEach((q, i) => "
                                "q.querySelector(`input[value=${(q.dataset.judge === 'true') !== (i === 0)}]`).click())")
            after = await page.evaluate("[...document.querySelectorAll('.judge')].map(j => j.offsetParent !== null)")
            answered = await page.evaluate("document.getElementById('answered').textContent")
            await page.evaluate("document.getElementById('download').click()")  # no name yet: nothing
            await asyncio.sleep(0.5)
            unnamed = {"files": list(downloads.glob("*")), "told": await page.visible("#need-name")}
            await page.type("#labeller", "  Ann  Lee ")
            await page.evaluate("document.getElementById('download').click()")
            for _ in range(100):
                if list(downloads.glob("*.csv")):
                    break
                await asyncio.sleep(0.1)
            return {"questions": questions, "transcripts": transcripts, "after": after, "answered": answered,
                    "unnamed": unnamed}

    seen = asyncio.run(label())
    questions = seen["questions"]
    assert len(questions) == len(rows)  # one per judgement: each item's outcome and each policy
    assert all(q["hidden"] and not q["shown"] for q in questions)  # the judge is hidden at first
    assert all(seen["after"]) and seen["answered"] == f"{len(rows)} of {len(rows)} answered"
    assert seen["transcripts"] >= 8  # the dialogs are on the page
    assert seen["unnamed"]["files"] == [] and seen["unnamed"]["told"]  # a name first
    [download] = downloads.glob("*.csv")
    assert download.name == f"labels-{run_id}-Ann_Lee.csv"
    lines = download.read_text().splitlines()
    assert lines[0] == "item,policy,violated,run,labeller" and len(lines) == len(rows) + 1
    assert all(line.endswith(f",{run_id},Ann Lee") for line in lines[1:])  # made on this run's dialogs, by Ann
    result = calibrate(runner, ws, download, "--json")  # the run it names
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["overall"]["n"] == len(rows)
    assert found["overall"]["agreement"] == round((len(rows) - 1) / len(rows), 4)


@pytest.mark.parametrize("name,content,message", [
    ("labels.csv", "item,policy,violated\nE0001,,caf\xe9\n".encode("latin-1"), "labels.csv: not UTF-8 text"),
    ("labels.jsonl", b'{"item": "E0001", "policy": "", "violated": true}\n' + b"[" * 100_000 + b"\n",
     "labels.jsonl:2: not JSON: nested too deeply"),
])
def test_an_unreadable_labels_file_is_one_line_naming_it(runner, tmp_path, judged, name, content, message):
    ws, run_id, _ = judged
    (tmp_path / name).write_bytes(content)
    result = calibrate(runner, ws, tmp_path / name, run_id)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1, result.output


def test_a_labels_file_without_labels_is_refused_and_keeps_the_runs_calibration(runner, tmp_path, judged):
    ws, run_id, rows = judged
    labels = write_labels(tmp_path / "labels.csv", [(item, policy, violated) for item, policy, violated, _ in rows])
    assert calibrate(runner, ws, labels, run_id).exit_code == 0
    for name, content in (("header.csv", "item,policy,violated\n"), ("empty.jsonl", "\n")):
        (tmp_path / name).write_text(content)
        result = calibrate(runner, ws, tmp_path / name, run_id)
        assert result.exit_code == 2, result.output
        assert f"{name}: no labels in the file" in result.output and result.output.count("\n") == 1
    from intellagent.store import Store

    stored = Store.for_workspace(ws).run_config(run_id)["calibration"]
    assert stored["overall"]["n"] == len(rows)  # what was stored stays


@pytest.mark.parametrize("confusion", [Confusion(both=3, judge_only=2), Confusion(judge_only=2, neither=3),
                                       Confusion(people_only=1, neither=4)])
def test_kappa_has_no_interval_when_one_sides_answers_are_constant(confusion):
    from intellagent.calibration import Agreement

    found = Agreement.of(confusion)
    assert found.kappa == 0.0 and str(found.kappa) == "0.0"  # never -0.0
    assert found.kappa_low is None and found.kappa_high is None  # not a point [0, 0]
    assert "interval undefined" in found.kappa_note and "interval undefined" in found.text()
    assert "-0.00" not in found.text()


def test_a_constant_labeller_shows_kappa_without_an_interval_everywhere(runner, tmp_path, judged):
    ws, run_id, rows = judged
    labels = write_labels(tmp_path / "labels.csv", [(item, policy, False) for item, policy, _, _ in rows])
    result = calibrate(runner, ws, labels, run_id, "--json")
    assert result.exit_code == 0, result.output
    overall = json.loads(result.stdout)["overall"]
    assert overall["kappa"] == 0.0 and overall["kappa_low"] is None and overall["kappa_high"] is None
    assert overall["kappa_note"] == "interval undefined: people gave one answer throughout"
    result = calibrate(runner, ws, labels, run_id)
    assert "κ 0.00 (interval undefined: people gave one answer throughout)" in result.stdout
    assert "-0.00" not in result.stdout
    page = (ws / "runs" / run_id / "report.html").read_text()
    assert "0.00 <span class=muted>(interval undefined: people gave one answer throughout)</span>" in page


def write_people(path: Path, answers: dict[str, dict[int, bool]], rows: list, column: bool = True) -> Path:
    """A labels file of several people: ``answers`` per labeller, each row of ``rows`` (by
    index) they labelled and what they said; without ``column``, one person's file with no
    labeller column."""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["item", "policy", "violated", *(["labeller"] if column else [])])
        for name, said in answers.items():
            out.writerows([rows[i][0], rows[i][1], str(v).lower(), *([name] if column else [])]
                          for i, v in said.items())
    return path


def majority_confusion(judge: list[bool], people: list[list[bool]]) -> tuple[dict[str, int], list[int]]:
    """The judge against people's majority, by hand: the confusion counts and the ties' rows."""
    counts = {"both": 0, "judge_only": 0, "people_only": 0, "neither": 0}
    ties = []
    for i, (says, said) in enumerate(zip(judge, people)):
        yes, no = said.count(True), said.count(False)
        if yes == no:
            ties.append(i)
            continue
        violated = yes > no
        counts["both" if says and violated else "judge_only" if says else "people_only" if violated
               else "neither"] += 1
    return counts, ties


def test_two_labellers_agree_by_cohens_kappa_and_the_judge_meets_their_majority(runner, tmp_path, judged):
    """Two people's files (one without a labeller column: named by its stem): their agreement
    over the judgements both labelled, Cohen's kappa written out; the judge against their
    majority per judgement, an even split left out and named. One labeller counted each row."""
    ws, run_id, rows = judged
    judge = [r[2] for r in rows]
    n = len(rows)
    ann = {i: judge[i] != (i in (0, 3)) for i in range(n)}  # every row
    bob = {i: judge[i] != (i in (1, 2, 3)) for i in range(n - 2)}  # all but the last two
    result = calibrate(runner, ws, write_people(tmp_path / "ann.csv", {"x": ann}, rows, column=False), run_id,
                       "--labels", str(write_people(tmp_path / "more.csv", {"bob": bob}, rows)), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["labellers"] == ["ann", "bob"] and found["rows"] == 2 * n - 2 and found["judgements"] == n

    # people among themselves: the n - 2 judgements both labelled, Cohen's kappa by hand
    both = [(ann[i], bob[i]) for i in range(n - 2)]
    m = len(both)
    p_o = sum(a == b for a, b in both) / m
    ann_yes, bob_yes = sum(a for a, _ in both) / m, sum(b for _, b in both) / m
    p_e = ann_yes * bob_yes + (1 - ann_yes) * (1 - bob_yes)
    people = found["people"]
    assert people["n"] == m and people["statistic"] == "Cohen's kappa" and people["labellers"] == ["ann", "bob"]
    assert people["kappa"] == round((p_o - p_e) / (1 - p_e), 4) and people["agreement"] == round(p_o, 4)
    assert people["kappa_low"] < people["kappa"] < people["kappa_high"]

    # the judge against the majority: rows 0, 1, 2 split evenly; row 3 both say otherwise
    counts, ties = majority_confusion(judge, [[ann[i]] + ([bob[i]] if i in bob else []) for i in range(n)])
    assert ties == [0, 1, 2]
    assert found["overall"]["confusion"] == counts and found["overall"]["n"] == n - 3
    assert found["ties"] == [rows[i][0] + (f"/{rows[i][1]}" if rows[i][1] else "") for i in ties]
    assert found["precision_recall"]["overall"]["n"] == n - 3

    text = calibrate(runner, ws, tmp_path / "ann.csv", run_id, "--labels", str(tmp_path / "more.csv")).stdout
    assert text.startswith(f"run {run_id}: judges against the majority of 2 labellers ({2 * n - 2} label(s) on "
                           f"{n} judgement(s)): agreement ")
    assert "; 3 tie(s) among people left out" in text.splitlines()[0]
    assert "  left out of the judge's figures, as people split evenly: " in text
    assert f"  people among themselves, 2 labellers (ann, bob): Cohen's kappa κ {people['kappa']:.2f} [" in text
    assert f"n={m} (the judgements every one of them labelled)" in text
    report = read_report(ws / "runs" / run_id / "report.json")
    assert report["calibration"]["people"]["kappa"] == people["kappa"]
    page = (ws / "runs" / run_id / "report.html").read_text()
    assert "people among themselves, 2 labellers (ann, bob): Cohen&#x27;s kappa" in page


def test_three_labellers_agree_by_fleiss_kappa_over_what_all_labelled(runner, tmp_path, judged):
    """Three people in one file (a labeller column): Fleiss' kappa written out over the
    judgements all three labelled; the judge against the majority of those who labelled each."""
    ws, run_id, rows = judged
    judge = [r[2] for r in rows]
    n = len(rows)
    answers = {"ann": {i: judge[i] for i in range(n)},
               "bob": {i: judge[i] != (i in (0, 1)) for i in range(n)},
               "cy": {i: judge[i] != (i in (1, 2)) for i in range(n - 1)}}  # not the last
    result = calibrate(runner, ws, write_people(tmp_path / "people.csv", answers, rows), run_id, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["labellers"] == ["ann", "bob", "cy"] and found["rows"] == 3 * n - 1

    # Fleiss' kappa by hand over the n - 1 rows all three labelled, r = 3 raters each
    r, N = 3, n - 1
    yes = [sum(answers[name][i] for name in answers) for i in range(N)]  # raters saying violated
    P_i = [(c * c + (r - c) * (r - c) - r) / (r * (r - 1)) for c in yes]
    P_bar = sum(P_i) / N
    p_yes = sum(yes) / (N * r)
    P_e = p_yes ** 2 + (1 - p_yes) ** 2
    people = found["people"]
    assert people["statistic"] == "Fleiss' kappa" and people["n"] == N
    assert people["kappa"] == round((P_bar - P_e) / (1 - P_e), 4) and people["agreement"] == round(P_bar, 4)

    counts, ties = majority_confusion(judge, [[answers[name][i] for name in answers if i in answers[name]]
                                              for i in range(n)])
    assert ties == [] and counts["judge_only"] + counts["people_only"] == 1  # row 1: bob and cy outvote ann
    assert found["overall"]["confusion"] == counts and found["ties"] == []


def test_fleiss_kappa_is_that_of_the_published_worked_example():
    """Fleiss (1971) as worked on Wikipedia's 'Fleiss' kappa' page: 10 subjects, 14 raters, 5
    categories, P̄ = 0.378, P̄e = 0.213, κ = 0.210; statsmodels 0.15.0's
    ``inter_rater.fleiss_kappa`` gives 0.20993070442195522 on the same table."""
    from intellagent.calibration import fleiss_kappa

    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.20993070442195522, abs=1e-12)
    assert round(fleiss_kappa(table), 3) == 0.210
    # two categories, three raters (statsmodels 0.15.0: 0.35714285714285715)
    assert fleiss_kappa([[3, 0], [2, 1], [1, 2], [3, 0], [0, 3], [2, 1], [3, 0]]) == pytest.approx(
        0.35714285714285715, abs=1e-12)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # every answer the same: no chance-corrected figure


def test_one_labeller_named_in_a_column_reads_as_a_file_without_one(runner, tmp_path, judged):
    """One person, named or not: the figures and the output as they were, no people's line."""
    ws, run_id, rows = judged
    said = {i: r[2] != (i == 0) for i, r in enumerate(rows)}
    plain = write_people(tmp_path / "labels.csv", {"x": said}, rows, column=False)
    named = write_people(tmp_path / "named" / "labels.csv", {"ann": said}, rows) if (tmp_path / "named").mkdir() \
        is None else None
    outputs = []
    for path in (plain, named):
        text, as_json = (calibrate(runner, ws, path, run_id, *extra) for extra in ((), ("--json",)))
        assert text.exit_code == 0 and as_json.exit_code == 0, text.output
        found = json.loads(as_json.stdout)
        assert not {"labellers", "people", "ties", "judgements"} & set(found)
        outputs.append((text.stdout.replace(str(path), "FILE"), {**found, "labels_file": ""}))
    assert outputs[0] == outputs[1]
    assert "people among themselves" not in outputs[0][0] and "split evenly" not in outputs[0][0]


@pytest.mark.parametrize("files,message", [
    # the same labeller twice on one judgement, across two files
    ({"a.csv": "item,policy,violated,labeller\nE0001,,true,ann\n", "b.csv": "item,policy,violated,labeller\n"
      "E0002,,true,ann\nE0001,,false,ann\n"},
     "b.csv:3: item 'E0001' (its outcome) is labelled already by labeller 'ann', at {tmp}/a.csv:2"),
    # two files named alike, no column: one labeller
    ({"labels.csv": "item,policy,violated\nE0001,,true\n", "x/labels.csv": "item,policy,violated\nE0001,,true\n"},
     "x/labels.csv:2: item 'E0001' (its outcome) is labelled already by labeller 'labels', at {tmp}/labels.csv:2"),
    ({f"f{i}.csv": "item,policy,violated\nE0001,,true\n" for i in range(21)}, "--labels: 21 labels files: at most 20"),
    ({"many.csv": "item,policy,violated,labeller\n" + "".join(f"E0001,,true,p{i}\n" for i in range(101))},
     "many.csv:102: more than 100 labellers"),
    ({"long.csv": "item,policy,violated,labeller\nE0001,,true," + "a" * 101 + "\n"},
     "long.csv:2: a labeller's name of 101 characters: at most 100"),
    ({"a.csv": "item,policy,violated\nE0001,,true,\n", "b.csv": "item,policy,violated,run\nE0002,,true,"
      "20990101-000000-abcdef\n"}, "b.csv:2: labelled on run 20990101-000000-abcdef, not on run"),
])
def test_several_labels_files_are_bounded_and_refuse_a_judgement_one_labeller_labelled_twice(
        runner, tmp_path, judged, files, message):
    ws, run_id, _ = judged
    args = []
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
        args += ["--labels", str(tmp_path / name)]
    result = runner.invoke(cli, ["calibrate", run_id, *args, "--workspace", str(ws)])
    assert result.exit_code == 2, result.output
    assert message.format(tmp=tmp_path) in result.output and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output


def test_grouping_by_a_label_the_scores_do_not_have_is_refused(runner, tmp_path, judged):
    """--by typo grouped every judgement as '(no typo)', with no word of the typo."""
    ws, run_id, rows = judged
    labels = write_labels(tmp_path / "labels.csv", [(item, policy, violated) for item, policy, violated, _ in rows])
    result = calibrate(runner, ws, labels, run_id, "--by", "categroy")
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "--by: the scores the labels name have no label 'categroy' to group by (theirs: category, "\
        "challenge, policy)" in result.output
    result = calibrate(runner, ws, labels, run_id, "--by", "challenge", "--json")
    assert result.exit_code == 0, result.output
    assert "(no challenge)" not in json.loads(result.stdout)["groups"]


def test_an_item_no_judge_reached_has_no_question_and_its_label_is_not_judged(runner, tmp_path, mixed):
    """An invalid event has no dialog and no verdict: the page asked 'did the agent get this item
    wrong?' with the judge's answer 'not violated' (its generator's 'invalid' read as not failed),
    and calibrate counted a label on it as agreement or a miss."""
    ws, run_id, statuses, _ = mixed
    invalid = [key for key, status in statuses.items() if status == "invalid"]
    failed = next(key for key, status in statuses.items() if status == "fail")
    out = tmp_path / "label.html"
    assert runner.invoke(cli, ["label", run_id, "--workspace", str(ws), "--out", str(out)]).exit_code == 0
    page = out.read_text()
    asked = {qid.split("|")[0] for qid in re.findall(r"data-id='([^']+)'", page)}
    # and a dialog no judge looked at (simulator-error) is not asked about either
    assert asked == {key for key, status in statuses.items() if status not in ("invalid", "simulator-error")}
    assert f"{len(invalid)} never reached a judging step" in page
    labels = write_labels(tmp_path / "labels.csv", [(invalid[0], "", False), (failed, "", True)])
    result = calibrate(runner, ws, labels, run_id, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["not_judged"] == [invalid[0]]
    assert found["overall"]["n"] == 1 and found["overall"]["confusion"]["both"] == 1


def test_labels_made_on_one_run_calibrate_that_run_and_no_other(runner, tmp_path, shop):
    """The page's download names its run: calibrate without RUN took the latest run, and a run
    made since (another agent, the same item ids) was calibrated with labels of other dialogs."""
    ws = tmp_path / "ws"
    ids = []
    for seed in ("1", "2"):
        result = runner.invoke(cli, ["run", str(shop), "--events", "2", "--seed", seed, "--workspace", str(ws)])
        assert result.exit_code == 0, result.output
        ids.append(re.search(r"^run (\S+):", result.output, re.M).group(1))
    labelled, latest = ids
    path = tmp_path / "labels.csv"
    path.write_text(f"item,policy,violated,run\nE0001,,true,{labelled}\nE0002,,false,{labelled}\n")
    result = calibrate(runner, ws, path, "--json")  # no RUN: the one the labels name, not the latest
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["run_id"] == labelled and json.loads(result.stdout)["overall"]["n"] == 2
    result = calibrate(runner, ws, path, latest)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"labels.csv:2: labelled on run {labelled}, not on run {latest}" in result.output
    path.write_text("item,policy,violated\nE0001,,true\n")  # a file without the column: the latest, as ever
    assert json.loads(calibrate(runner, ws, path, "--json").stdout)["run_id"] == latest
    path.write_text("item,policy,violated,run\nE0001,,true,\nE0002,,true,20990101-000000-abcdef\n")
    result = calibrate(runner, ws, path)  # made in another workspace
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "labels.csv:3: labelled on run 20990101-000000-abcdef, which this workspace does not have" in result.output


def test_a_dialog_the_simulated_user_broke_is_left_out_of_agreement_kappa_precision_and_recall(
        runner, tmp_path, mixed):
    """simulator-error: the user kept stopping for a wrong reason and the judge never saw the
    dialog. Agreement and kappa read it as the judge's 'not violated': people's 'violated' on it
    counted as a miss, their 'not violated' as agreement (here κ 0.10 where the judged rows give
    0.25). Every figure now rests on the judged rows alone, as precision and recall did, and the
    rows left out are named in the terminal, --json and the report."""
    ws, run_id, statuses, final = mixed
    # the judged rows: (item, policy, the judge says violated, category), each item's outcome and
    # its policies, as the critic declares their statuses (event: fail, agent-error failed;
    # policy: fail failed, pass and not-exercised not)
    judged = []
    for key, item in final.items():
        if item["step"] == "verdicts" and item["status"] in ("pass", "fail", "agent-error", "not-exercised"):
            judged.append((key, "", item["status"] in ("fail", "agent-error"), "(item outcome)"))
            judged += [(key, s["labels"]["policy"], s["status"] == "fail", s["labels"]["category"])
                       for s in item["scores"] if s["name"] == "policy"]
    broken = sorted(key for key, status in statuses.items() if status == "simulator-error")
    assert len(judged) >= 6 and len(broken) >= 2, (judged, broken)
    flipped = {1, 3, 5}  # people disagree with the judge on these judged rows
    people = [(item, policy, says != (i in flipped)) for i, (item, policy, says, _) in enumerate(judged)]
    # on the broken dialogs people say violated, but for the last
    unjudged = [(key, "", key != broken[-1]) for key in broken]
    result = calibrate(runner, ws, write_labels(tmp_path / "labels.csv", people + unjudged), run_id, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)

    # the confusion counts over the judged rows alone, by hand
    both = sum(says and said for (_, _, says, _), (_, _, said) in zip(judged, people))
    judge_only = sum(says and not said for (_, _, says, _), (_, _, said) in zip(judged, people))
    people_only = sum(not says and said for (_, _, says, _), (_, _, said) in zip(judged, people))
    neither = sum(not says and not said for (_, _, says, _), (_, _, said) in zip(judged, people))
    n = len(judged)
    assert found["overall"]["confusion"] == {"both": both, "judge_only": judge_only,
                                             "people_only": people_only, "neither": neither}
    assert found["overall"]["n"] == n and found["rows"] == n + len(broken)
    # agreement and Cohen's kappa written out: p_o observed, p_e by chance from the margins
    p_o = (both + neither) / n
    judge_yes, people_yes = (both + judge_only) / n, (both + people_only) / n
    p_e = judge_yes * people_yes + (1 - judge_yes) * (1 - people_yes)
    kappa = (p_o - p_e) / (1 - p_e)
    assert found["overall"]["agreement"] == round(p_o, 4)
    assert found["overall"]["kappa"] == round(kappa, 4)
    # counted as the judge's 'not violated', the broken rows would give another kappa
    b_both, b_judge_only, b_people_only, b_neither = both, judge_only, people_only + len(broken) - 1, neither + 1
    b_n = n + len(broken)
    b_judge, b_people = (b_both + b_judge_only) / b_n, (b_both + b_people_only) / b_n
    b_e = b_judge * b_people + (1 - b_judge) * (1 - b_people)
    assert round(((b_both + b_neither) / b_n - b_e) / (1 - b_e), 4) != round(kappa, 4)
    # the items' own outcomes as a group: the judged ones alone
    outcomes = [(says, said) for (_, policy, says, _), (_, _, said) in zip(judged, people) if not policy]
    group = found["groups"]["(item outcome)"]
    assert group["n"] == len(outcomes)
    assert group["confusion"]["people_only"] == sum(not says and said for says, said in outcomes)
    assert group["confusion"]["neither"] == sum(not says and not said for says, said in outcomes)
    assert sum(g["n"] for g in found["groups"].values()) == n

    # named, with their status, once for every figure; precision and recall rest on the same rows
    named = [f"{key} (simulator-error)" for key in broken]
    assert found["left_out"] == named and found["not_judged"] == []
    assert found["precision_recall"]["overall"]["n"] == n
    assert found["precision_recall"]["overall"]["confusion"] == found["overall"]["confusion"]
    assert not set(broken) & set(found["precision_recall"]["overall"]["misses"])
    text = calibrate(runner, ws, tmp_path / "labels.csv", run_id).stdout
    assert f"; {len(broken)} row(s) left out, as no judge looked" in text.splitlines()[0]
    assert f"left out of every figure, as no judge looked: {', '.join(named)}" in text
    report = read_report(ws / "runs" / run_id / "report.json")
    assert report["calibration"]["left_out"] == named and report["calibration"]["overall"]["n"] == n
    page = (ws / "runs" / run_id / "report.html").read_text()
    section = page[page.index("id=calibration"):]
    links = ", ".join(f"<a href='#i-{key}'>{key} (simulator-error)</a>" for key in broken)
    assert f"Left out of every figure, as no judge looked (the dialog broke before one could): {links}." in section


def page_questions(page: str) -> list[tuple[str, str, str, str, str]]:
    """(item, subject column, its value, the judge's answer, as shown) of each question on a
    labelling page."""
    return re.findall(r"<div class=question data-id='[^']*' data-item='([^']*)' data-subject='([^']*)' "
                      r"data-value='([^']*)' data-judge='([^']*)'>.*?The judge: <b class=answer>([^<]+)</b>", page)


def test_the_labelling_page_leaves_out_dialogs_no_judge_looked_at_and_says_so(runner, tmp_path, mixed):
    """simulator-error: the simulated user broke the dialog and no judge saw it. The page asked
    people to label it ('The judge: no judge looked') and calibrate dropped every answer on it;
    it also took a place of --limit. Now it is not on the page; the page and the command say
    how many were left out and why, and every answer the page can give counts in calibrate."""
    ws, run_id, statuses, final = mixed
    broken = sorted(key for key, status in statuses.items() if status == "simulator-error")
    looked = [key for key, status in statuses.items() if status not in ("invalid", "simulator-error")]
    assert len(broken) >= 2 and looked
    out = tmp_path / "label.html"
    result = runner.invoke(cli, ["label", run_id, "--workspace", str(ws), "--out", str(out),
                                 "--limit", str(len(looked))])
    assert result.exit_code == 0, result.output
    said = f"left out: {len(broken)} item(s), no judge looked at (simulator-error: the dialog broke before a judge could see it"
    assert result.output.splitlines()[1] == f"  {said}); calibrate would count no answer on them"
    page = out.read_text()
    assert html.escape(said, quote=True) in page and "no judge looked</b>" not in page
    questions = page_questions(page)
    assert {q[0] for q in questions} == set(looked)  # the broken ones take no place of --limit
    assert not any(f"id='item-{key}'" in page for key in broken)
    for item, subject, value, judge, shown in questions:
        if not subject and statuses[item] == "fail":
            assert (judge, shown) == ("true", "violated"), item
    # whatever a person answers on the page, calibrate counts it
    labels = tmp_path / "labels.csv"
    labels.write_text("item,policy,violated\n" + "".join(f"{item},{value},true\n" for item, _, value, _, _ in questions))
    result = calibrate(runner, ws, labels, run_id, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["left_out"] == [] and found["not_judged"] == [] and found["overall"]["n"] == len(questions)


def failing_judge(request, response_model):
    """The critic role: a stop check finds the user's stop wrong on some dialogs (with no
    feedback round left: simulator-error, never shown to the judge); the judge's own call fails
    on some others (its model down: infra-error, the judge could not decide); its findings
    elsewhere fabricated from their schema."""
    draw = random.Random(request.key())
    if response_model.__name__ == "StopCheck":
        return {"correct": draw.random() >= 0.3, "feedback": "look again"}
    if draw.random() < 0.3:
        raise ProviderError("the judge's model is down")
    return fabricate(response_model.model_json_schema(), draw)


def test_the_labelling_page_leaves_out_judgements_the_judge_could_not_decide_and_says_so(runner, tmp_path):
    """infra-error: the judge's call failed and it decided nothing. The page still asked people
    about it ('The judge: could not decide') and calibrate dropped every answer on it (not
    judged). Now it is left out as a dialog no judge looked at is, counted under its own reason
    in the same sentence, and every answer the page can give counts in calibrate."""
    shop = write_env(tmp_path)
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", str(shop), "--events", "10", "--seed", "1", "--workspace", str(ws),
                                 "--set", "steps.dialogs.with.max_feedback=0", "--set",
                                 "llm.roles.critic={model: mock/function, options: {function: "
                                 "'tests.test_calibration:failing_judge'}}"])
    assert result.exit_code == 3, result.output  # the judge's failed calls could not finish
    report = read_report(next(ws.glob("runs/*/report.json")))
    statuses = {item["item"]: item["status"] for item in report["items"] if item["item"]}
    undecided = sorted(key for key, status in statuses.items() if status == "infra-error")
    broken = sorted(key for key, status in statuses.items() if status == "simulator-error")
    judged = [key for key, status in statuses.items() if status not in ("infra-error", "simulator-error", "invalid")]
    assert undecided and broken and judged, statuses
    out = tmp_path / "label.html"
    result = runner.invoke(cli, ["label", "--workspace", str(ws), "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = (f"left out: {len(broken)} item(s), no judge looked at (simulator-error: the dialog broke before a "
            f"judge could see it); {len(undecided)} item(s), the judge could not decide (infra-error: its "
            "judging did not finish); calibrate would count no answer on them")
    assert result.output.splitlines()[1] == f"  {said}"
    page = out.read_text()
    assert html.escape(said, quote=True) in page and "could not decide</b>" not in page
    questions = page_questions(page)
    assert {q[0] for q in questions} == set(judged)
    assert not any(f"id='item-{key}'" in page for key in undecided)
    labels = tmp_path / "labels.csv"
    labels.write_text("item,policy,violated\n" + "".join(f"{item},{value},true\n" for item, _, value, _, _ in questions))
    found = json.loads(calibrate(runner, ws, labels, "--json").stdout)
    assert found["left_out"] == [] and found["not_judged"] == [] and found["overall"]["n"] == len(questions)
    # an answer on an undecided dialog is one calibrate drops: the page asks none
    labels.write_text("item,policy,violated\n" + "".join(f"{item},,true\n" for item in undecided))
    assert json.loads(calibrate(runner, ws, labels, "--json").stdout)["not_judged"] == undecided
