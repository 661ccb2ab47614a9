"""Can a team trust the judge's "violated"? ``calibrate``'s precision and recall per thing judged
and overall, checked by hand on a small designed table: a third party's critic judges rules R1-R4
of twelve cases as the table says, people's labels disagree where the table says, and every
figure is worked out here from the counts (Wilson's interval written out below, and pinned to
statsmodels' for the main ones), never by calling the code under test."""

from __future__ import annotations

import csv
import json
import math
import re
import types

import pytest
from pydantic import BaseModel

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.steps import PASS_FAIL, Critic, Output, Sampler, Score, ScoreSpec, Statuses
from intellagent_plugins.reporters.writers import read_report

CASE = Statuses(passed=["pass"], failed=["fail"], other=["broken"], unjudged=["broken"])

# The judge's answers: the cases (C01-C12) it calls violated, per rule. C13 it never judged.
JUDGE = {"R1": {1, 2, 3, 4, 5, 6}, "R2": {1, 2, 3, 4, 5}, "R3": {1}, "R4": set()}
# People's labels: the cases they call violated, per rule (only the cases listed are labelled).
PEOPLE = {"R1": {1, 2, 3, 4, 5, 7, 8}, "R2": {1, 2}, "R3": {1}, "R4": set()}
LABELLED = {"R1": range(1, 13), "R2": range(1, 13), "R3": range(1, 4), "R4": range(1, 3)}
# the items' own outcomes: C01-C04 fail (a rule violated), people disagree on C04; C13 broke
# before any judge saw it, and people say it went wrong
OUTCOMES = {1: True, 2: True, 3: True, 4: False, 13: True}


class Case(BaseModel):
    id: str
    number: int


class Cases(Sampler):
    name = "cases"
    output = list[Case]

    def run(self, ctx):
        return [Case(id=f"C{i:02d}", number=i) for i in range(1, 14)]


class RuleJudge(Critic):
    """Judges each rule of a case as JUDGE says; case 13 broke before it could (unjudged)."""

    name = "rule-judge"
    inputs = {"case": Case}
    output = Case
    statuses = CASE
    scores = {"rule": ScoreSpec(statuses=PASS_FAIL, labels=["rule", "category"], subject="rule")}

    def run(self, ctx, case):
        if case.number == 13:
            return Output(value=case, status="broken")
        scores = [Score(name="rule", status="fail" if case.number in cases else "pass",
                        labels={"rule": rule, "category": "money" if rule in ("R1", "R2") else "care"})
                  for rule, cases in JUDGE.items()]
        failed = any(s.status == "fail" for s in scores)
        return Output(value=case, status="fail" if failed else "pass", scores=scores)


def plugin() -> types.ModuleType:
    module = types.ModuleType("rules")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: [register(c) for c in (Cases, RuleJudge)])
    return module


PIPELINE = """\
steps:
  cases: {use: acme/cases}
  verdicts: {use: acme/rule-judge, each: cases}
report: [json, html]
"""


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's score interval, as Wilson (1927) wrote it: the roots in p of
    (k/n - p)^2 = z^2 p (1 - p) / n."""
    a = 1 + z * z / n
    b = -(2 * k / n + z * z / n)
    c = (k / n) ** 2
    root = math.sqrt(b * b - 4 * a * c)
    return max(0.0, (-b - root) / (2 * a)), min(1.0, (-b + root) / (2 * a))


def test_the_written_out_wilson_interval_is_statsmodels():
    """statsmodels 0.15.0, ``proportion_confint(k, n, method="wilson")``."""
    for (k, n), expected in {(5, 6): (0.43649717781352965, 0.9699466302516933),
                             (5, 7): (0.3589344518326191, 0.9177810759959432),
                             (2, 5): (0.11762077423264788, 0.7692757187239871),
                             (11, 16): (0.4440435583474066, 0.8583535614521797),
                             (11, 13): (0.5776536898051745, 0.9567418216419188)}.items():
        assert wilson(k, n) == pytest.approx(expected, abs=1e-6)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The run, people's labels, and calibrate's JSON and terminal output."""
    from click.testing import CliRunner

    from tests.conftest import write_env

    root = tmp_path_factory.mktemp("reliability")
    shop = write_env(root)
    (root / "p.yaml").write_text(PIPELINE)
    ws = root / "ws"
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, [*args, "--workspace", str(ws)], obj={"plugins": (plugin(),)})

    result = invoke("run", str(shop), "--pipeline", str(root / "p.yaml"))
    assert result.exit_code == 0, result.output
    with (root / "labels.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["item", "rule", "violated"])
        for case, violated in OUTCOMES.items():
            out.writerow([f"C{case:02d}", "", str(violated).lower()])
        for rule, cases in LABELLED.items():
            out.writerows([f"C{case:02d}", rule, str(case in PEOPLE[rule]).lower()] for case in cases)
    as_json = invoke("calibrate", "--labels", str(root / "labels.csv"), "--json")
    assert as_json.exit_code == 0, as_json.output
    text = invoke("calibrate", "--labels", str(root / "labels.csv"))
    assert text.exit_code == 0, text.output
    return json.loads(as_json.stdout), text.stdout, ws


def counts(judge: set[int], people: set[int], labelled) -> tuple[int, int, int, int]:
    """(both, the judge alone, people alone, neither) over the labelled cases."""
    both = sum(1 for c in labelled if c in judge and c in people)
    judge_only = sum(1 for c in labelled if c in judge and c not in people)
    people_only = sum(1 for c in labelled if c not in judge and c in people)
    return both, judge_only, people_only, len(labelled) - both - judge_only - people_only


def assert_share(found: dict, name: str, k: int, n: int) -> None:
    if n == 0:
        assert found[name] is None and found[f"{name}_low"] is None and found[f"{name}_n"] == 0
        return
    low, high = wilson(k, n)
    assert found[name] == round(k / n, 4) and found[f"{name}_n"] == n
    assert found[f"{name}_low"] == pytest.approx(low, abs=1e-4)
    assert found[f"{name}_high"] == pytest.approx(high, abs=1e-4)


def test_precision_and_recall_per_rule_are_the_hand_counted_ones(calibrated):
    found = calibrated[0]["precision_recall"]
    # R1: 6 judged violated, 5 of them by people too; people say 7 (C07, C08 missed)
    assert counts(JUDGE["R1"], PEOPLE["R1"], LABELLED["R1"]) == (5, 1, 2, 4)
    r1 = found["things"]["rule R1"]
    assert r1["n"] == 12 and r1["confusion"] == {"both": 5, "judge_only": 1, "people_only": 2, "neither": 4}
    assert_share(r1, "precision", 5, 6)
    assert_share(r1, "recall", 5, 7)
    assert r1["false_alarms"] == ["C06"] and r1["misses"] == ["C07", "C08"]
    # R2: 5 judged violated, people agree on 2; people say 2, both found
    r2 = found["things"]["rule R2"]
    assert_share(r2, "precision", 2, 5)
    assert_share(r2, "recall", 2, 2)
    assert r2["false_alarms"] == ["C03", "C04", "C05"] and r2["misses"] == []
    # R3: one 'violated' each side, agreed: too few to rank; R4: nobody says violated
    assert_share(found["things"]["rule R3"], "precision", 1, 1)
    assert_share(found["things"]["rule R4"], "precision", 0, 0)
    assert_share(found["things"]["rule R4"], "recall", 0, 0)
    # the items' own outcomes: C01-C04 judged failed, people agree on 3; C13 left out
    outcome = found["things"]["(item outcome)"]
    assert outcome["n"] == 4
    assert_share(outcome, "precision", 3, 4)
    assert_share(outcome, "recall", 3, 3)
    assert outcome["false_alarms"] == ["C04"]


def test_every_figure_leaves_out_what_no_judge_looked_at(calibrated):
    found = calibrated[0]
    overall = found["precision_recall"]["overall"]
    tables = [counts(JUDGE[r], PEOPLE[r], LABELLED[r]) for r in JUDGE] + [(3, 1, 0, 0)]  # + the outcomes
    both, judge_only, people_only, neither = (sum(t[i] for t in tables) for i in range(4))
    assert (both, judge_only, people_only, neither) == (11, 5, 2, 15)
    assert overall["n"] == 33
    assert_share(overall, "precision", 11, 16)
    assert_share(overall, "recall", 11, 13)
    assert overall["false_alarms"] == ["C04", "C06/R1", "C03/R2", "C04/R2", "C05/R2"]
    assert overall["misses"] == ["C07/R1", "C08/R1"]
    assert found["left_out"] == ["C13 (broken)"]
    # agreement and kappa on the same 33 rows: C13's "broken" is no judge's "not violated" (it
    # counted as a miss: n 34, people alone 3, κ 0.52)
    assert found["overall"]["n"] == 33
    assert found["overall"]["confusion"] == {"both": 11, "judge_only": 5, "people_only": 2, "neither": 15}
    observed = (11 + 15) / 33
    chance = (16 / 33) * (13 / 33) + (17 / 33) * (20 / 33)  # the judge's margins, people's
    assert found["overall"]["agreement"] == round(observed, 4)
    assert found["overall"]["kappa"] == round((observed - chance) / (1 - chance), 4) == round(310 / 541, 4)


def test_the_least_reliable_rule_comes_first_and_too_few_labels_are_marked_not_ranked(calibrated):
    found, text, _ = calibrated
    things = found["precision_recall"]["things"]
    # R2's worse figure is its precision, 2/5; R1's its recall, 5/7; both rest on 5 or more
    assert [(name, r["rank"]) for name, r in things.items()] == [
        ("rule R2", 1), ("rule R1", 2), ("(item outcome)", None), ("rule R3", None), ("rule R4", None)]
    assert things["rule R3"]["unranked"].startswith("too few labels")
    assert things["(item outcome)"]["unranked"].startswith("too few labels")  # 4 and 3 'violated', below 5
    assert things["rule R4"]["unranked"] == "neither side says violated"
    lines = text.splitlines()
    at = {name: next(i for i, line in enumerate(lines) if name in line)
          for name in ("left out of every figure, as no judge looked: C13 (broken)", "1. rule R2",
                       "2. rule R1", "not ranked, too few labels", "– rule R3",
                       "not ranked, neither side says violated: rule R4 (n=2)")}
    assert list(at.values()) == sorted(at.values())  # in this order
    r2 = lines[at["1. rule R2"]]
    low, high = wilson(2, 5)
    assert f"precision 40% ({low:.0%}–{high:.0%}, 2 of 5)" in r2 and "false alarms: C03, C04, C05" in r2
    r1 = lines[at["2. rule R1"]]
    assert "recall 71% (36%–92%, 5 of 7)" in r1 and "misses: C07, C08" in r1


def test_the_report_shows_the_table_with_links_to_the_items(calibrated):
    _, _, ws = calibrated
    [folder] = ws.glob("runs/*")
    report = read_report(folder / "report.json")
    assert report["calibration"]["precision_recall"]["things"]["rule R2"]["rank"] == 1  # kept with the run
    page = (folder / "report.html").read_text()
    table = page[page.index("The judge's “violated”"):page.index("</section>", page.index("id=calibration"))]
    names = re.findall(r"<tr><td class=num>[^<]*</td><td>([^<]+)</td>", table)
    assert names == ["overall", "rule R2", "rule R1", "(item outcome)", "rule R3", "rule R4"]
    assert "<a href='#i-C06'>C06</a>" in table and "<a href='#i-C03'>C03/R2</a>" in table
    assert f"{wilson(2, 5)[0]:.0%}–{wilson(2, 5)[1]:.0%}, 2 of 5" in table
    section = page[page.index("id=calibration"):page.index("The judge's “violated”")]
    assert "Left out of every figure, as no judge looked (the dialog broke before one could): " \
        "<a href='#i-C13'>C13 (broken)</a>." in section


def test_unjudged_statuses_are_some_of_the_other_ones_and_merge_as_they_do():
    from pydantic import ValidationError

    from intellagent.steps import merge_scores

    with pytest.raises(ValidationError, match="unjudged statuses must be among other: broke"):
        Statuses(passed=["pass"], failed=["broke"], unjudged=["broke"])
    a = ScoreSpec(statuses=Statuses(passed=["pass"], other=["skipped"]))
    b = ScoreSpec(statuses=Statuses(passed=["pass"], other=["skipped", "broken"],
                                    unjudged=["skipped", "broken"]))
    merged = merge_scores(a, b).statuses
    assert merged.other == ["skipped", "broken"] and merged.unjudged == ["broken"]  # 'skipped' is a's: judged
