"""ALMITA's metrics: the seven test metrics, overall and per intent, and the funnel of what each
filtering step generated, removed (by which rule) and kept (the paper's Table 1).

The seven metrics, over the tests the agent answered (infra errors are not counted; an agent
crash counts as a wrong action):

- reply recall: of the tests that expect a reply, the share where the agent replied (rather than
  calling an API);
- correct reply: of the tests that expect a reply, the share where it replied and the reply's
  similarity to the expected one reaches the threshold;
- API recall: of the tests that expect an API call, the share where it called an API;
- correct API: … where it called the expected API (by name);
- correct API parameters: … the expected API with the expected parameter values;
- test correctness: of all tests, the share whose whole expected action was right;
- conversation correctness: of all conversations, the share whose every test was right.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from pydantic import BaseModel, Field

from intellagent.metrics import Column, Metric, MetricResult, Rate
from intellagent.model import StrictModel
from intellagent_plugins.almita.artefacts import TestVerdict

SEVEN = {
    "reply_recall": "reply recall",
    "correct_reply": "correct reply",
    "api_recall": "API recall",
    "correct_api": "correct API",
    "correct_parameters": "correct API parameters",
    "test": "test correctness",
    "conversation": "conversation correctness",
}


def seven_metrics(verdicts: Iterable[TestVerdict]) -> dict[str, Rate]:
    """The seven metrics of ``verdicts`` as rates (passed / n with a Wilson interval)."""
    counts = {k: [0, 0] for k in SEVEN}
    conversations: dict[str, bool] = {}

    def add(name: str, ok: bool) -> None:
        counts[name][0] += ok
        counts[name][1] += 1

    for v in verdicts:
        if v.expected == "reply":
            add("reply_recall", v.reply_recall)
            add("correct_reply", v.correct_reply)
        elif v.expected == "api":
            add("api_recall", v.api_recall)
            add("correct_api", v.correct_api)
            add("correct_parameters", v.correct_parameters)
        add("test", v.correct)
        conversations[v.conversation] = conversations.get(v.conversation, True) and v.correct
    for ok in conversations.values():
        add("conversation", ok)
    return {k: Rate.of(*c) for k, c in counts.items()}


DESCRIPTION = ("Reply recall and correct reply (similarity ≥ threshold) over the tests expecting a "
               "reply; API recall, correct API (name) and correct API parameters (name and values) "
               "over the tests expecting an API call; test correctness over all tests; conversation "
               "correctness over conversations (every test right). Infra errors are not counted; an "
               "agent crash is a wrong action.")


class SevenConfig(StrictModel):
    step: str = Field(default="verdicts", description="The step whose items are the test verdicts.")
    title: str = "ALMITA metrics (overall and per intent)"


class AlmitaMetrics(Metric):
    """The seven metrics, overall and per intent."""

    name = "almita-metrics"
    Config = SevenConfig

    def check(self, plan: Any) -> str | None:
        step = plan.steps.get(self.config.step)
        if step is None:
            return f"no step named '{self.config.step}' (steps: {', '.join(plan.steps)})"
        if not (isinstance(step.output.base, type) and issubclass(step.output.base, TestVerdict)):
            return f"step '{self.config.step}' does not give test verdicts"
        return None

    def compute(self, data: Any) -> MetricResult:
        by_intent: dict[str, list[TestVerdict]] = defaultdict(list)
        everything: list[TestVerdict] = []
        for _, verdict in data.values(self.config.step):
            by_intent[verdict.intent].append(verdict)
            everything.append(verdict)
        overall = seven_metrics(everything)
        rows = [self._row("all", overall, len(everything))]
        rows += [self._row(intent, seven_metrics(vs), len(vs)) for intent, vs in sorted(by_intent.items())]
        columns = [Column(key="intent", label="intent", group=True), Column(key="tests", label="tests", kind="number")]
        columns += [Column(key=k, label=label, kind="rate") for k, label in SEVEN.items()]
        values = {k: r.rate for k, r in overall.items()}
        headline = "almita " + ", ".join(f"{SEVEN[k]} {'–' if r.rate is None else f'{r.rate:.0%}'}"
                                         for k, r in overall.items()) + f" ({len(everything)} tests)"
        return MetricResult(name=self.name, title=self.config.title, headline=headline, values=values,
                            columns=columns, rows=rows, description=DESCRIPTION)

    @staticmethod
    def _row(intent: str, rates: dict[str, Rate], tests: int) -> dict[str, Any]:
        return {"intent": intent, "tests": tests} | {k: r.model_dump() for k, r in rates.items()}


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

    name = "almita-funnel"
    Config = FunnelConfig

    def check(self, plan: Any) -> str | None:
        missing = [s.step for s in self.config.stages if s.step not in plan.steps]
        return f"no step named '{missing[0]}' (steps: {', '.join(plan.steps)})" if missing else None

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
