"""The generic metrics on hand-made scores, against figures computed by hand."""

from __future__ import annotations

import math

from intellagent.metrics import (MicroPRConfig, MicroPRMetric, RateConfig, RateMetric, RatioConfig,
                                 RatioMetric)
from intellagent.steps import Score


class Data:
    """Scores as a run would stream them."""

    def __init__(self, scores):
        self._scores = scores

    def scores(self, name=None, step=None):
        for s in self._scores:
            if name is None or s.name == name:
                yield None, s


def test_rate_with_wilson_interval_groups_and_statuses_apart():
    scores = [Score(name="e", status=st, labels={"level": lvl, "cat": cats})
              for st, lvl, cats in [("pass", 1, ["a"]), ("fail", 1, ["a", "b"]), ("pass", 2, ["b"]),
                                    ("infra-error", 2, ["b"]), ("agent-error", 2, ["a"])]]
    overall = RateMetric(RateConfig(score="e", failed=["fail", "agent-error"])).compute(Data(scores))
    assert overall.values["n"] == 4 and overall.values["passed"] == 2 and overall.values["rate"] == 0.5
    # Wilson 95 % for 2/4: centre (0.5 + 1.92/4)/(1 + 3.84/4) = 0.5, half-width 0.3849... → 0.15, 0.85
    assert (overall.values["low"], overall.values["high"]) == (0.15, 0.85)
    by_cat = {r["cat"]: r for r in RateMetric(RateConfig(score="e", by=["cat"])).compute(Data(scores)).rows}
    assert by_cat["a"]["rate"]["n"] == 2 and by_cat["b"]["rate"]["n"] == 2  # a list label counts in each group
    assert by_cat["b"]["other"] == "infra-error 1" and by_cat["a"]["other"] == "agent-error 1"
    above = RateMetric(RateConfig(score="e", by=["level"], cumulative=True)).compute(Data(scores)).rows
    assert [(r["level"], r["rate"]["n"]) for r in above] == [(1, 3), (2, 1)]


def test_micro_averages_sum_before_dividing():
    scores = [Score(name=n, value=v, labels={"set": s}) for s, m, p, a in [("easy", 1, 1, 1), ("easy", 0, 3, 1),
                                                                             ("hard", 4, 5, 8)]
              for n, v in (("m", m), ("p", p), ("a", a))]
    result = MicroPRMetric(MicroPRConfig(matched="m", predicted="p", actual="a")).compute(Data(scores))
    assert result.values == {"precision": round(5 / 9, 4), "recall": round(5 / 10, 4)}
    macro = ((1 / 1 + 0 / 3 + 4 / 5) / 3)
    assert not math.isclose(result.values["precision"], macro)
    ratio = RatioMetric(RatioConfig(numerator="m", denominator="a", by=["set"])).compute(Data(scores))
    assert {r["set"]: r["value"] for r in ratio.rows} == {"easy": 0.5, "hard": 0.5}
    empty = RatioMetric(RatioConfig(numerator="x", denominator="y", empty=1.0)).compute(Data(scores))
    assert empty.values == {"value": 1.0}


def test_a_grouped_rate_or_ratio_with_a_headline_lists_every_group_on_one_line():
    scores = [Score(name="c", status=st, labels={"set": s}) for st, s in
              [("pass", "easy"), ("pass", "easy"), ("pass", "hard"), ("fail", "hard")]]
    scores += [Score(name=n, value=v, labels={"set": s}) for s, m, p in [("easy", 2, 2), ("hard", 1, 4)]
               for n, v in (("m", m), ("p", p))]
    rate = RateMetric(RateConfig(score="c", by=["set"], headline="success")).compute(Data(scores))
    assert rate.headline == ("success: easy 100% (34%–100%, n=2); hard 50% (9%–91%, n=2)")
    ratio = RatioMetric(RatioConfig(numerator="m", denominator="p", by=["set"],
                                    headline="precision")).compute(Data(scores))
    assert ratio.headline == "precision: easy 1.0; hard 0.25"
    assert RateMetric(RateConfig(score="c", by=["set"])).compute(Data(scores)).headline is None


def test_a_runs_scores_stream_reads_only_its_scored_items_and_misses_none(tmp_path):
    """Metrics read a run's scores pass after pass: the stream takes only the items that have
    scores from the store (a run's events and dialogs have none), and every score is in it."""
    from click.testing import CliRunner

    from intellagent.cli import cli
    from intellagent.registry import load_registry
    from intellagent.report import load_run
    from intellagent.store import Store

    workspace = tmp_path / "ws"
    result = CliRunner().invoke(cli, ["run", "retail", "--events", "6", "--workspace", str(workspace)])
    assert result.exit_code == 0, result.output
    store = Store.for_workspace(workspace)
    _, _, data = load_run(store, store.resolve_run("latest"), load_registry())
    every = list(data.items())
    scored = [(i.step, i.item) for i in every if i.scores]
    assert scored and len(scored) < len(every)  # the run has items without scores
    assert [(i.step, i.item) for i in data.items(scored=True)] == scored
    assert [(i.step, i.item, s.name, s.status) for i, s in data.scores()] == \
        [(i.step, i.item, s.name, s.status) for i in every for s in i.scores]
    assert [(i.item, s.status) for i, s in data.scores("event")] == \
        [(i.item, s.status) for i in every for s in i.scores if s.name == "event"] != []


def test_a_count_stays_an_integer_in_a_metrics_values():
    """A count is written to a report as 5, not 5.0, whatever pydantic's version (2.8 wrote an int
    as the first type of float | int that takes it)."""
    import json

    from intellagent.metrics import MetricResult

    result = MetricResult(name="m", title="t", values={"tasks": 5, "rate": 0.5, "none": None})
    values = json.loads(result.model_dump_json())["values"]
    assert type(values["tasks"]) is int and type(values["rate"]) is float and values["none"] is None
