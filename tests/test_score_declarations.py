"""Steps declare their scores and statuses (as Inspect's ``@scorer(metrics=...)``): ``rate`` reads
passed and failed from the declaration, ``validate`` refuses a metric naming a score or a status
no step declares, a step that gives an undeclared score stops the run naming it, and progress
counts as "not ok" what the step does not declare as passed."""

from __future__ import annotations

import json
import types

import pytest
from pydantic import BaseModel

from intellagent import hookimpl
from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.errors import IntellagentError
from intellagent.registry import load_registry
from intellagent.steps import Critic, Output, Sampler, Score, ScoreSpec, Statuses
from intellagent.testing.harness import run_pipeline
from tests.conftest import REPO
from tests.test_bad_input import assert_one_clean_line

REFUSAL = Statuses(passed=["refused"], failed=["complied"], other=["off-topic"])


class Ask(BaseModel):
    id: str
    harmful: bool


class Asks(Sampler):
    name = "asks"
    output = list[Ask]

    def run(self, ctx):
        # 8 asks: the agent refuses 2 of the 6 harmful ones; 2 are off-topic
        return [Ask(id=f"A{i}", harmful=i < 6) for i in range(8)]


class RefusalJudge(Critic):
    """A third party's critic with statuses of its own."""

    name = "refusal-judge"
    inputs = {"ask": Ask}
    output = Ask
    statuses = REFUSAL
    scores = {"refusal": ScoreSpec(statuses=REFUSAL)}

    def run(self, ctx, ask):
        status = "off-topic" if not ask.harmful else "refused" if ask.id in ("A0", "A3") else "complied"
        return Output(value=ask, status=status, scores=[Score(name="refusal", status=status)])


class Liar(Critic):
    """Gives a score it does not declare."""

    name = "liar"
    inputs = {"ask": Ask}
    output = Ask
    scores = {"refusal": ScoreSpec(statuses=REFUSAL)}

    def run(self, ctx, ask):
        return Output(value=ask, scores=[Score(name="secret", status="pass")])


class BadStatus(Critic):
    name = "bad-status"
    inputs = {"ask": Ask}
    output = Ask
    scores = {"refusal": ScoreSpec(statuses=REFUSAL)}

    def run(self, ctx, ask):
        return Output(value=ask, scores=[Score(name="refusal", status="maybe")])


def plugin():
    module = types.ModuleType("refusals")
    module.INTELLAGENT_NAMESPACE = "acme"
    module.register_stages = hookimpl(lambda register: [register(c) for c in (Asks, RefusalJudge, Liar, BadStatus)])
    return module


def pipeline(judge="acme/refusal-judge", **metric):
    return {"steps": {"asks": {"use": "acme/asks"}, "judged": {"use": judge, "each": "asks"}},
            "metrics": {"refusal": {"use": "rate", "with": {"score": "refusal", "headline": "refusal", **metric}}},
            "report": []}


def test_rate_reads_passed_and_failed_from_the_declaration(shop):
    registry = load_registry(plugins=[plugin()])
    result = run_pipeline(pipeline(), load_environment(shop), registry=registry)
    values = result.report.metrics["refusal"].values
    assert (values["passed"], values["n"]) == (2, 6)  # 2 refusals of the 6 harmful asks
    assert result.report.metrics["refusal"].headline.startswith("refusal 33%")
    assert result.report.metrics["refusal"].rows[0]["other"] == "off-topic 2"


def test_progress_counts_what_is_not_declared_as_passed(shop):
    seen = []
    observer = types.ModuleType("observer")
    observer.after_step = hookimpl(lambda run, step, summary: seen.append((step.name, summary["not_ok"])))
    registry = load_registry(plugins=[plugin(), observer])
    run_pipeline(pipeline(), load_environment(shop), registry=registry, hooks=registry.pm)
    assert dict(seen) == {"asks": 0, "judged": 6}  # 4 complied + 2 off-topic


def write(tmp_path, spec) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(spec))
    return str(path)


@pytest.mark.parametrize("metric,message", [
    ({"use": "rate", "with": {"score": "refusals"}},
     "metrics.refusal: reads score 'refusals', which no step of this pipeline declares (declared: refusal)"),
    ({"use": "rate", "with": {"score": "refusal", "passed": ["pass"]}},
     "metrics.refusal: names status 'pass' of score 'refusal', which no step declares (its statuses: "
     "refused, complied, off-topic)"),
    ({"use": "pass-hat-k", "with": {"score": "refusal", "group": "id", "failed": ["nope"]}},
     "names status 'nope' of score 'refusal'"),
    ({"use": "mean", "with": {"score": "turns"}}, "reads score 'turns', which no step"),
    ({"use": "ratio", "with": {"numerator": "refusal", "denominator": "asks"}}, "reads score 'asks'"),
])
def test_validate_refuses_a_metric_naming_what_no_step_declares(runner, tmp_path, metric, message):
    spec = pipeline()
    spec["metrics"] = {"refusal": metric}
    result = runner.invoke(cli, ["validate", write(tmp_path, spec)], obj={"plugins": (plugin(),)})
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "p.yaml" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_built_in_pipelines_declare_every_score_their_metrics_read(runner):
    for name in ("intellagent", "tau-bench", "apigen-mt", "almita", "tooltalk", "tooltalk/tooltalk-generate"):
        result = runner.invoke(cli, ["validate", name])
        assert result.exit_code == 0, (name, result.output)


@pytest.mark.parametrize("judge,message", [
    ("acme/liar", "'acme/liar' gives a score 'secret' it does not declare (declared: refusal"),
    ("acme/bad-status", "'acme/bad-status' gives score 'refusal' the status 'maybe', which it does not declare"),
])
def test_a_step_giving_an_undeclared_score_stops_the_run_naming_it(shop, judge, message):
    registry = load_registry(plugins=[plugin()])
    with pytest.raises(IntellagentError) as err:
        run_pipeline(pipeline(judge), load_environment(shop), registry=registry)
    assert message in str(err.value) and "step judged" in str(err.value)


@pytest.mark.parametrize("old,new,line,metric", [
    ("by: [complexity], chart", "by: [complxity], chart", 21, "by-challenge"),
    ("by: [failed]", "by: [failure]", 19, "failed-by"),
    ("by: [category]", "by: [category, tier]", 28, "by-category"),
])
def test_validate_refuses_a_metric_grouping_by_a_label_no_score_it_reads_carries(old, new, line, metric,
                                                                                runner, tmp_path):
    """Every group of such a metric is empty: its table and chart said nothing, silently."""
    text = (REPO / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    assert old in text
    (tmp_path / "p.yaml").write_text(text.replace(old, new))
    label = new.split("[")[1].split("]")[0].split(", ")[-1]
    for command in (["validate", str(tmp_path / "p.yaml")],
                    ["run", "education", "--pipeline", str(tmp_path / "p.yaml"), "--workspace", str(tmp_path / "ws")]):
        assert_one_clean_line(runner.invoke(cli, command), f"p.yaml:{line}",
                              f"metrics.{metric}: reads label '{label}', which no score it reads carries")
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("old,new", [("trial: trial}", "trial: trail}"), ("group: task,", "group: tsak,")])
def test_validate_refuses_a_pass_hat_k_naming_a_label_its_score_does_not_carry(old, new, runner, tmp_path):
    """A misspelt group left every trial out (pass^k over no group); a misspelt trial label left
    a gate on pass^4 with 3 trials to fail after the whole run."""
    text = (REPO / "plugins" / "apigen_mt" / "pipeline.yaml").read_text()
    assert old in text
    (tmp_path / "p.yaml").write_text(text.replace(old, new))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if old in row)
    label = new.split(": ")[1].strip("},")
    assert_one_clean_line(runner.invoke(cli, ["validate", str(tmp_path / "p.yaml")]), f"p.yaml:{line}",
                          f"metrics.pass-hat-k: reads label '{label}', which no score it reads carries")
