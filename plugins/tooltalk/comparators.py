"""Text comparators: how similar a predicted free-text argument (an email's body, a reminder's
task) is to the ground truth's, from 0 to 1, for the thresholds the tools declare.

ToolTalk scores these with the cosine of DistilBERT's [CLS] vectors, a model it downloads at
run time. The default here needs no model and no network:

- ``token-sort`` (default): rapidfuzz's ``token_sort_ratio`` on lower-cased text stripped of
  punctuation: the Indel similarity of the two texts with their words sorted. Word order, case
  and punctuation do not count; every word added, dropped or changed does, in proportion to its
  length. 0.9 means about one character in ten differs.
- ``token-set``: rapidfuzz's ``token_set_ratio``: 1 when one text's words are all in the other
  (lenient: a short reply that repeats some words scores 1).
- ``exact``: 1 when the texts are equal after trimming, else 0.
- ``distilbert-cls``: ToolTalk's own measure (``transformers`` and the ``distilbert-base-uncased``
  weights must be installed locally; nothing is downloaded).
- ``module:function`` or ``file.py:function``: your own ``f(prediction, truth) -> float``.
"""

from __future__ import annotations

import functools
import inspect
import math
from pathlib import Path
from typing import Callable

from intellagent.environment.refs import ReferenceError_, resolve
from intellagent.errors import ConfigError

Comparator = Callable[[str, str], float]
BUILT_IN = ("token-sort", "token-set", "exact", "distilbert-cls")


def token_sort(prediction: str, truth: str) -> float:
    from rapidfuzz import fuzz, utils

    return fuzz.token_sort_ratio(prediction, truth, processor=utils.default_process) / 100.0


def token_set(prediction: str, truth: str) -> float:
    from rapidfuzz import fuzz, utils

    return fuzz.token_set_ratio(prediction, truth, processor=utils.default_process) / 100.0


def exact(prediction: str, truth: str) -> float:
    return 1.0 if prediction.strip() == truth.strip() else 0.0


@functools.lru_cache(maxsize=1)
def _distilbert():  # pragma: no cover - needs the model's weights, which tests cannot have
    try:
        import torch
        from transformers import DistilBertModel, DistilBertTokenizer
    except ImportError as exc:
        raise ConfigError(f"the distilbert-cls comparator needs torch and transformers ({exc})",
                          item="comparator") from None
    try:
        name = "distilbert-base-uncased"
        tokenizer = DistilBertTokenizer.from_pretrained(name, local_files_only=True)
        model = DistilBertModel.from_pretrained(name, local_files_only=True)
    except OSError as exc:
        raise ConfigError(f"distilbert-cls: the model's weights are not available locally ({exc})",
                          item="comparator") from None

    @functools.lru_cache(maxsize=4096)
    def vector(text: str) -> tuple[float, ...]:
        with torch.no_grad():
            output = model(**tokenizer(text, return_tensors="pt"))
        return tuple(output.last_hidden_state.squeeze()[0].tolist())

    return vector


def distilbert_cls(prediction: str, truth: str) -> float:  # pragma: no cover - see _distilbert
    vector = _distilbert()
    a, b = vector(prediction), vector(truth)
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def comparator(name: str, base: Path | None = None) -> Comparator:
    """The comparator called ``name`` (a built-in, or a reference to a function)."""
    found = {"token-sort": token_sort, "token-set": token_set, "exact": exact,
             "distilbert-cls": distilbert_cls}.get(name)
    if found is not None:
        return found
    if ":" not in name:
        raise ConfigError(f"unknown comparator '{name}' (built in: {', '.join(BUILT_IN)}; or "
                          "'module:function')", item="comparator")
    try:
        fn = resolve(name, base or Path.cwd())
    except ReferenceError_ as exc:
        raise ConfigError(f"comparator: {exc}", item="comparator") from None
    if not callable(fn):
        raise ConfigError(f"comparator '{name}' is not callable", item="comparator")
    return fn


def source_of(name: str) -> str | None:
    """The code of a comparator given by reference, for cache keys (None for a built-in)."""
    if name in BUILT_IN:
        return None
    try:
        return inspect.getsource(comparator(name))
    except (TypeError, OSError, ConfigError):
        return None
