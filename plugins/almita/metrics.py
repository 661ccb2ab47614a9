"""ALMITA's metrics: the seven test metrics, overall and per intent, and the funnel of what each
filtering step generated, removed (by which rule) and kept (the paper's Table 1).

The seven metrics of the paper, over the tests the agent answered (infra errors are not
counted; an agent crash counts as a wrong action), each over the paper's own denominator:

- reply recall: of the tests that expect a reply, the share where the agent replied (rather than
  calling an API);
- correct reply: of the tests that expect a reply *and where the agent replied*, the share whose
  reply's similarity to the expected one reaches the threshold;
- API recall: of the tests that expect an API call, the share where it called an API;
- correct API: of the tests that expect an API call *and where it called one*, the share where
  it called the expected API (by name);
- correct API parameters: of the tests where it *called the expected API*, the share with the
  expected parameter values (compared exactly, or leniently: ``almita-critic``'s ``parameters``);
- test correctness: of all tests, the share whose whole expected action was right;
- conversation correctness: of the conversations whose every test was scored, the share whose
  every test was right. A conversation with a test that was not scored (an infra error, a
  budget stop) is left out, not counted either way, and the number left out is reported: the
  unscored test might have been right or wrong, and counting the conversation only when another
  of its tests failed would bias the rate downwards.

So correct reply can exceed reply recall (the paper's GPT-4 row: reply recall 53.2 %, correct
reply 77.7 %). Beside them, the unconditional forms, under names of their own: the share of all
tests expecting a reply that got a correct reply (= reply recall × correct reply), of all tests
expecting an API call that got the expected API, and that got it with the expected parameters.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from pydantic import BaseModel, Field

from intellagent.metrics import Column, GateValues, Metric, MetricResult, Rate
from intellagent.model import StrictModel
from intellagent_plugins.almita.artefacts import TestCase, TestVerdict

SEVEN = {
    "reply_recall": "reply recall",
    "correct_reply": "correct reply",
    "api_recall": "API recall",
    "correct_api": "correct API",
    "correct_parameters": "correct API parameters",
    "test": "test correctness",
    "conversation": "conversation correctness",
}

#: The unconditional forms of correct reply, correct API and correct API parameters: over every
#: test expecting a reply or an API call, whatever the agent did.
OVERALL = {
    "reply_right": "right reply, of all reply tests",
    "api_right": "right API, of all API tests",
    "call_right": "right API and parameters, of all API tests",
}

METRICS = SEVEN | OVERALL


def conversations_of(verdicts: Iterable[TestVerdict]) -> tuple[dict[str, bool], set[str]]:
    """Per conversation whose every test has a verdict: whether every test was right; and the
    conversations left out because some of their tests have none."""
    scored: dict[str, set[str]] = defaultdict(set)
    right: dict[str, bool] = {}
    size: dict[str, int | None] = {}
    for v in verdicts:
        scored[v.conversation].add(v.test)
        right[v.conversation] = right.get(v.conversation, True) and v.correct
        size[v.conversation] = v.conversation_tests
    whole = {c: ok for c, ok in right.items() if size[c] is None or len(scored[c]) >= size[c]}
    return whole, set(right) - set(whole)


def unscored_conversations(verdicts: Iterable[TestVerdict]) -> set[str]:
    """The conversations of ``verdicts`` with a test that was not scored."""
    return conversations_of(verdicts)[1]


def seven_metrics(verdicts: Iterable[TestVerdict]) -> dict[str, Rate]:
    """The seven metrics of ``verdicts`` as rates (passed / n with a Wilson interval), each over
    the paper's denominator (correct reply over the tests where the agent replied, correct API
    over those where it called an API, correct API parameters over those where it called the
    expected one), and the three unconditional forms (:data:`OVERALL`); conversation correctness
    over the conversations whose every test has a verdict."""
    verdicts = list(verdicts)
    counts = {k: [0, 0] for k in METRICS}

    def add(name: str, ok: bool) -> None:
        counts[name][0] += ok
        counts[name][1] += 1

    for v in verdicts:
        if v.expected == "reply":
            add("reply_recall", v.reply_recall)
            if v.reply_recall:
                add("correct_reply", v.correct_reply)
            add("reply_right", v.correct_reply)
        elif v.expected == "api":
            add("api_recall", v.api_recall)
            if v.api_recall:
                add("correct_api", v.correct_api)
            if v.correct_api:
                add("correct_parameters", v.correct_parameters)
            add("api_right", v.correct_api)
            add("call_right", v.correct_parameters)
        add("test", v.correct)
    for ok in conversations_of(verdicts)[0].values():
        add("conversation", ok)
    return {k: Rate.of(*c) for k, c in counts.items()}


DESCRIPTION = ("The paper's seven metrics, each over its own denominator: reply recall over the tests "
               "expecting a reply; correct reply (similarity ≥ threshold) over those where the agent "
               "also replied; API recall over the tests expecting an API call; correct API (name) over "
               "those where it also called an API; correct API parameters (name and values) over those "
               "where it called the expected API; test correctness over all tests; conversation "
               "correctness over the conversations whose every test was scored (every test right; a "
               "conversation with a test not scored is left out and counted apart). The last three "
               "columns are the unconditional forms, over every test expecting a reply or an API call. "
               "Infra errors are not counted; an agent crash is a wrong action.")


class SevenConfig(StrictModel):
    step: str = Field(default="verdicts", description="The step whose items are the test verdicts.")
    title: str = "ALMITA metrics (overall and per intent)"


class AlmitaMetrics(Metric):
    """The seven metrics (with the paper's denominators) and the unconditional forms, overall and
    per intent."""

    name = "metrics"
    Config = SevenConfig

    def check(self, plan: Any) -> str | None:
        step = plan.steps.get(self.config.step)
        if step is None:
            return f"no step named '{self.config.step}' (steps: {', '.join(plan.steps)})"
        if not (isinstance(step.output.base, type) and issubclass(step.output.base, TestVerdict)):
            return f"step '{self.config.step}' does not give test verdicts"
        return None

    def values(self, plan: Any, env: Any) -> GateValues:
        """Each metric overall (``almita.test``) and per intent (``almita.all.test``); the intents
        come from the model."""
        return GateValues(own=[*METRICS, "conversations_left_out"], per_group=["tests", *METRICS, "left_out"])

    def compute(self, data: Any) -> MetricResult:
        by_intent: dict[str, list[TestVerdict]] = defaultdict(list)
        everything: list[TestVerdict] = []
        for _, verdict in data.values(self.config.step):
            by_intent[verdict.intent].append(verdict)
            everything.append(verdict)
        unjudged = self._unjudged(data, {v.conversation for v in everything})
        for intent in unjudged.values():
            by_intent.setdefault(intent, [])

        def left_out(vs: list[TestVerdict], intent: str | None = None) -> int:
            return len(unscored_conversations(vs)) + sum(intent in (None, i) for i in unjudged.values())

        overall = seven_metrics(everything)
        rows = [self._row("all", overall, len(everything), left_out(everything))]
        rows += [self._row(intent, seven_metrics(vs), len(vs), left_out(vs, intent))
                 for intent, vs in sorted(by_intent.items())]
        columns = [Column(key="intent", label="intent", group=True), Column(key="tests", label="tests", kind="number")]
        columns += [Column(key=k, label=label, kind="rate") for k, label in METRICS.items()]
        columns.append(Column(key="left_out", label="conversations left out (a test not scored)", kind="number"))
        values: dict[str, Any] = {k: r.rate for k, r in overall.items()}
        values["conversations_left_out"] = rows[0]["left_out"]
        headline = "almita " + ", ".join(f"{SEVEN[k]} {'–' if r.rate is None else f'{r.rate:.0%}'}"
                                         for k, r in overall.items() if k in SEVEN) + f" ({len(everything)} tests"
        if rows[0]["left_out"]:
            headline += f"; {rows[0]['left_out']} conversations left out: a test not scored"
        return MetricResult(name=self.name, title=self.config.title, headline=headline + ")", values=values,
                            columns=columns, rows=rows, description=DESCRIPTION)

    def _unjudged(self, data: Any, judged: set[str]) -> dict[str, str]:
        """Conversation → intent for the conversations none of whose tests has a verdict (every
        one ended with an infra error), read from the step that gives the verdicts their tests."""
        plan = data.plan
        step = plan.steps.get(self.config.step)
        out: dict[str, str] = {}
        for wire in step.wires if step is not None else []:
            base = plan.steps[wire.source].output.base if wire.source in plan.steps else None
            if not (isinstance(base, type) and issubclass(base, TestCase)):
                continue
            for _, value in data.values(wire.source):
                for test in value if isinstance(value, list) else [value]:
                    if test.conversation not in judged:
                        out[test.conversation] = test.intent
        return out

    @staticmethod
    def _row(intent: str, rates: dict[str, Rate], tests: int, left_out: int) -> dict[str, Any]:
        return {"intent": intent, "tests": tests} | {k: r.model_dump() for k, r in rates.items()} | {
            "left_out": left_out}


class Stage(BaseModel):
    step: str
    label: str


class FunnelConfig(StrictModel):
    stages: list[Stage] = Field(description="The steps to count, in order, each with what its items "
                                "are (`{step: apis, label: procedures}`).")
    title: str = "Funnel: generated → removed by rule → kept"


class AlmitaFunnel(Metric):
    """Per stage: how many items the step had, how many each rule removed, how many ended
    otherwise (infra errors, agent errors), and how many went on."""

    name = "funnel"
    Config = FunnelConfig

    def check(self, plan: Any) -> str | None:
        missing = [s.step for s in self.config.stages if s.step not in plan.steps]
        return f"no step named '{missing[0]}' (steps: {', '.join(plan.steps)})" if missing else None

    def groups(self, plan: Any, env: Any) -> list[str]:
        """Its stages, each a row."""
        return [s.label for s in self.config.stages]

    def values(self, plan: Any, env: Any) -> GateValues:
        """What each stage kept (``funnel.tests``), and a stage's counts (``funnel.tests.removed``)."""
        return GateValues(own=[s.label for s in self.config.stages], per_group=["generated", "removed", "kept"])

    def compute(self, data: Any) -> MetricResult:
        rows = []
        values: dict[str, Any] = {}
        for stage in self.config.stages:
            generated = kept = 0
            rules: dict[str, int] = defaultdict(int)
            other: dict[str, int] = defaultdict(int)
            for item in data.items(stage.step):
                generated += 1
                if item.status in ("ok", "pass", "fail"):
                    kept += 1
                    continue
                rule = next((s.labels.get("rule") for s in item.scores
                             if s.name == "almita-filter" and s.status == "rejected"), None)
                if rule:
                    rules[rule] += 1
                else:
                    other[item.status] += 1
            removed = sum(rules.values())
            rows.append({"stage": stage.label, "step": stage.step, "generated": generated,
                         "removed": removed,
                         "by_rule": ", ".join(f"{r} {n}" for r, n in sorted(rules.items(), key=lambda kv: -kv[1])),
                         "other": ", ".join(f"{s} {n}" for s, n in sorted(other.items())), "kept": kept})
            values[stage.label] = kept
        columns = [Column(key="stage", label="stage", group=True), Column(key="step", label="step"),
                   Column(key="generated", label="generated", kind="number"),
                   Column(key="removed", label="removed by rules", kind="number"),
                   Column(key="by_rule", label="rule: removed"),
                   Column(key="other", label="ended otherwise"),
                   Column(key="kept", label="kept", kind="number")]
        headline = "funnel " + " → ".join(f"{r['kept']} {r['stage']}" for r in rows)
        return MetricResult(name=self.name, title=self.config.title, headline=headline, values=values,
                            columns=columns, rows=rows,
                            description="Each row counts one step's items: what it generated or "
                                        "received, what each rule removed, what ended otherwise "
                                        "(an infra error is retried by the next run), and what went on.")
