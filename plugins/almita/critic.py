"""``almita-critic``: the predicted action against the expected one, flag by flag, for the
seven metrics (reply recall, correct reply, API recall, correct API, correct API parameters,
test correctness, conversation correctness)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from intellagent.errors import ConfigError
from intellagent.model import StrictModel
from intellagent.steps import Critic, Output, Score
from intellagent_plugins.almita.artefacts import Prediction, TestCase, TestVerdict
from intellagent_plugins.almita.similarity import scorer


def normalise(value: Any) -> Any:
    """A value as compared: text case-folded and trimmed, numbers (also written as text) as
    floats, nulls dropped from objects."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().casefold()
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if v is not None}
    return value


def same_arguments(expected: dict[str, Any] | None, predicted: dict[str, Any] | None) -> bool:
    return normalise(expected or {}) == normalise(predicted or {})


class CriticConfig(StrictModel):
    scorer: str = Field(default="chrf", description="Reply similarity: chrf (offline, default), "
                        "bertscore (needs bert-score), or 'module:function' of your own.")
    threshold: float | None = Field(default=None, ge=0, le=1, description="A reply is correct at "
                                    "this similarity or more; default: the scorer's own (chrf 0.40, "
                                    "bertscore 0.55).")

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


def judge(test: TestCase, prediction: Prediction, score_fn, threshold: float) -> TestVerdict:
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
        verdict.correct_parameters = verdict.correct_api and same_arguments(expected.arguments, predicted.arguments)
        verdict.correct = verdict.correct_parameters
        verdict.why = ("" if verdict.correct else f"expected a call of {expected.api}, got {predicted.kind}"
                       if not verdict.api_recall else f"called {predicted.api} instead of {expected.api}"
                       if not verdict.correct_api else "arguments differ")
    if prediction.error:
        verdict.why = f"agent error: {prediction.error}"
    return verdict


class AlmitaCritic(Critic):
    """Each test's flags; its score (pass/fail, labelled with intent and conversation) feeds
    the ``almita-metrics`` metric."""

    name = "almita-critic"
    Config = CriticConfig
    inputs = {"test": TestCase, "prediction": Prediction}
    output = TestVerdict

    def __init__(self, config: CriticConfig) -> None:
        super().__init__(config)
        self._scorer = None

    def run(self, ctx, test: TestCase, prediction: Prediction) -> Output[TestVerdict]:
        if self._scorer is None:  # the options were checked: the scorer resolves, a threshold is known
            fn, default = scorer(self.config.scorer)
            self._scorer = (fn, self.config.threshold if self.config.threshold is not None else default)
        verdict = judge(test, prediction, *self._scorer)
        status = "pass" if verdict.correct else "fail"
        score = Score(name="almita-test", status=status, value=float(verdict.correct), note=verdict.why,
                      labels={"intent": test.intent, "conversation": test.conversation,
                              "expected": test.expected.kind})
        return Output(value=verdict, status=status, note=verdict.why, scores=[score])
