"""Reply similarity: is the agent's reply close enough to the expected one?

The scorer is pluggable (``scorer:`` of ``almita-critic``):

- ``chrf`` (the default, offline, no model): the chrF character n-gram F-score (Popović, 2015)
  with the usual settings (character n-grams of 1 to 6, whitespace removed, recall weighted
  twice as much as precision, β = 2), on case-folded text, scaled to 0–1. Character n-grams
  reward the same words in other forms ("refund"/"refunded") and share of content over exact
  wording; it is the reference-based metric of choice where BLEU is too brittle for short texts.
  Its default threshold, 0.40, is the middle of the gap between the hand-written pairs of
  equivalent and of different agent replies in ``tests/test_almita_metrics.py`` (equivalent
  pairs score 0.48–0.75, different ones 0.11–0.32). A lexical score cannot see a paraphrase
  that shares no words; point ``scorer`` at ``bertscore`` or your own for that.
- ``bertscore``: BERTScore F1 rescaled with its baseline, threshold 0.55 as in the ALMITA
  paper. Needs ``pip install bert-score`` and downloads its model the first time.
- ``module:function`` or ``file.py:function``: your own ``fn(expected, predicted) -> float``.

A threshold given in the options overrides the scorer's own.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Callable

from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError

Scorer = Callable[[str, str], float]


def _ngrams(text: str, n: int) -> Counter:
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def chrf(expected: str, predicted: str, *, order: int = 6, beta: float = 2.0,
         lowercase: bool = True) -> float:
    """chrF of ``predicted`` against ``expected`` in 0–1: precision and recall of character
    n-grams (n = 1 … ``order``, whitespace removed) averaged over the orders both texts reach,
    combined as an F-score weighting recall ``beta`` times."""
    if lowercase:
        expected, predicted = expected.casefold(), predicted.casefold()
    ref = "".join(expected.split())
    hyp = "".join(predicted.split())
    if not ref or not hyp:
        return 1.0 if ref == hyp else 0.0
    precision = recall = 0.0
    effective = 0
    for n in range(1, order + 1):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        if not h or not r:
            continue
        match = sum((h & r).values())
        precision += match / sum(h.values())
        recall += match / sum(r.values())
        effective += 1
    precision /= effective
    recall /= effective
    if precision + recall == 0:
        return 0.0
    factor = beta * beta
    return (1 + factor) * precision * recall / (factor * precision + recall)


@lru_cache(maxsize=1)
def _bert_scorer():  # pragma: no cover - needs the optional package and its model
    try:
        from bert_score import BERTScorer
    except ImportError:
        raise ConfigError("scorer 'bertscore' needs the bert-score package: pip install bert-score",
                          item="almita-critic") from None
    return BERTScorer(lang="en", rescale_with_baseline=True)


def bertscore(expected: str, predicted: str) -> float:  # pragma: no cover - optional model
    _, _, f1 = _bert_scorer().score([predicted], [expected])
    return float(f1[0])


BUILTIN: dict[str, tuple[Scorer, float]] = {"chrf": (chrf, 0.40), "bertscore": (bertscore, 0.55)}


def source_of(name: str) -> str | None:
    """A digest of the file that defines a scorer of your own, for cache keys: edit it and the
    verdicts it shaped are made again (None for a built-in, or one without a source file)."""
    if name in BUILTIN:
        return None
    try:
        path = inspect.getsourcefile(scorer(name)[0])
    except (TypeError, ConfigError):
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path and Path(path).is_file() else None


def scorer(name: str) -> tuple[Scorer, float | None]:
    """The scorer named ``name`` and its default threshold (None for one of your own)."""
    if name in BUILTIN:
        return BUILTIN[name]
    try:
        fn = resolve(name, Path.cwd())
    except ReferenceError_ as exc:
        raise ConfigError(f"scorer: {exc} (built in: {', '.join(BUILTIN)})", item="almita-critic") from None
    if not callable(fn):
        raise ConfigError(f"scorer '{name}' is not callable", item="almita-critic")
    return fn, None
