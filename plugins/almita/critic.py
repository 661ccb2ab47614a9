"""``almita-critic``: the predicted action against the expected one, flag by flag, for the
seven metrics (reply recall, correct reply, API recall, correct API, correct API parameters,
test correctness, conversation correctness)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.steps import PASS_FAIL, Critic, Output, Score, ScoreSpec
from intellagent_plugins.almita.artefacts import Prediction, TestCase, TestVerdict
from intellagent_plugins.almita.similarity import scorer, source_of


def comparable(value: Any, lenient: bool = False) -> Any:
    """A JSON value as compared, its type kept apart (text is not a number, true is not 1):
    numbers as numbers (2 is 2.0), nulls in objects dropped (an optional argument passed as null,
    as OpenAI's strict mode passes unused ones, is one left out). ``lenient`` also trims and
    case-folds text and reads finite numbers written as text ("2" is 2)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, str):
        if not lenient:
            return ("text", value)
        text = value.strip().casefold()
        try:
            number = float(text)
        except ValueError:
            return ("text", text)
        return ("number", number) if math.isfinite(number) else ("text", text)
    if isinstance(value, list):
        return ("list", [comparable(v, lenient) for v in value])
    if isinstance(value, dict):
        return ("object", {k: comparable(v, lenient) for k, v in value.items() if v is not None})
    return ("other", value)


def differing(expected: dict[str, Any] | None, predicted: dict[str, Any] | None,
              lenient: bool = False) -> list[str]:
    """The names of the arguments whose values differ (given on one side only included)."""
    a, b = comparable(expected or {}, lenient)[1], comparable(predicted or {}, lenient)[1]
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def same_arguments(expected: dict[str, Any] | None, predicted: dict[str, Any] | None,
                   lenient: bool = False) -> bool:
    return not differing(expected, predicted, lenient)


class CriticConfig(StrictModel):
    scorer: str = Field(default="chrf", description="Reply similarity: chrf (offline, default), "
                        "bertscore (needs bert-score), or 'module:function' of your own.")
    threshold: float | None = Field(default=None, ge=0, le=1, description="A reply is correct at "
                                    "this similarity or more; default: the scorer's own (chrf 0.40, "
                                    "bertscore 0.55).")
    parameters: Literal["exact", "lenient"] = Field(
        default="exact", description="How API parameter values are compared: exact (text character "
        "for character, numbers as numbers, true is not 1, null as left out) or lenient (also text "
        "trimmed and case-folded, numbers written as text read as numbers).")

    @field_validator("scorer")
    @classmethod
    def _known(cls, value: str) -> str:  # refused by `validate` and before a run's first model call
        try:
            scorer(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        return value

    @model_validator(mode="after")
    def _threshold(self) -> "CriticConfig":
        if self.threshold is None and scorer(self.scorer)[1] is None:
            raise ValueError(f"scorer '{self.scorer}' needs a threshold (with: {{threshold: …}})")
        return self


def judge(test: TestCase, prediction: Prediction, score_fn, threshold: float, *,
          lenient: bool = False) -> TestVerdict:
    expected, predicted = test.expected, prediction.action
    verdict = TestVerdict(test=test.id, conversation=test.conversation,
                          conversation_tests=test.conversation_tests, intent=test.intent,
                          expected=expected.kind, predicted=predicted.kind, threshold=threshold,
                          expected_action=expected, predicted_action=predicted)
    if expected.kind == "reply":
        verdict.reply_recall = predicted.kind == "reply"
        if verdict.reply_recall:
            verdict.similarity = round(float(score_fn(expected.text, predicted.text)), 4)
            verdict.correct_reply = verdict.similarity >= threshold
        verdict.correct = verdict.correct_reply
        verdict.why = ("" if verdict.correct else f"similarity {verdict.similarity} < {threshold}"
                       if verdict.reply_recall else f"expected a reply, got {predicted.kind}"
                       + (f" ({predicted.api})" if predicted.api else ""))
    elif expected.kind == "api":
        verdict.api_recall = predicted.kind == "api"
        verdict.correct_api = verdict.api_recall and predicted.api == expected.api
        differ = differing(expected.arguments, predicted.arguments, lenient) if verdict.correct_api else []
        verdict.correct_parameters = verdict.correct_api and not differ
        verdict.correct = verdict.correct_parameters
        verdict.why = ("" if verdict.correct else f"expected a call of {expected.api}, got {predicted.kind}"
                       if not verdict.api_recall else f"called {predicted.api} instead of {expected.api}"
                       if not verdict.correct_api else f"arguments differ: {', '.join(differ)}")
    if prediction.error:
        verdict.why = f"agent error: {prediction.error}"
    return verdict


class AlmitaCritic(Critic):
    """Each test's flags; its score (pass/fail, labelled with intent and conversation) feeds
    the ``almita-metrics`` metric."""

    name = "critic"
    statuses = PASS_FAIL
    scores = {"almita-test": ScoreSpec(statuses=PASS_FAIL, value=True,
                                       labels=["intent", "conversation", "expected"])}
    Config = CriticConfig
    inputs = {"test": TestCase, "prediction": Prediction}
    output = TestVerdict

    def __init__(self, config: CriticConfig) -> None:
        super().__init__(config)
        self._scorer = None

    def fingerprint(self) -> Any:
        return source_of(self.config.scorer)

    def run(self, ctx, test: TestCase, prediction: Prediction) -> Output[TestVerdict]:
        if self._scorer is None:  # the options were checked: the scorer resolves, a threshold is known
            fn, default = scorer(self.config.scorer)
            self._scorer = (fn, self.config.threshold if self.config.threshold is not None else default)
        verdict = judge(test, prediction, *self._scorer, lenient=self.config.parameters == "lenient")
        status = "pass" if verdict.correct else "fail"
        score = Score(name="almita-test", status=status, value=float(verdict.correct), note=verdict.why,
                      labels={"intent": test.intent, "conversation": test.conversation,
                              "expected": test.expected.kind})
        return Output(value=verdict, status=status, note=verdict.why, scores=[score])
