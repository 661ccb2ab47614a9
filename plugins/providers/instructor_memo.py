"""Memoize instructor's per-response-model preparation.

instructor (1.1x, v2 core) rebuilds the response schema class for every call, and so misses its
own cache of the OpenAI tool schema, and walks the model for async validators several times per
call: about 3 ms of CPU a call, more than the HTTP round trip to a local server. Both depend only
on the response model class, so we memoize them by class; the check for async validators of a
class made per call that adds nothing to its base but a class attribute is its base's. Some
instructor modules bind these helpers at import, so every loaded ``instructor`` module's
reference is replaced; if a future instructor renames them, nothing is patched and calls are
merely slower.

instructor also reads the docstring of every class it makes a tool schema for
(``docstring_parser.parse``, which builds its parsers and their regular expressions anew on
each call). A step that makes a response class per event (each with its own field values)
gives them all the same docstring, so the parse is memoized by its text.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any, Callable

from intellagent.llm.types import RECENT_MODELS

MAX_ENTRIES = RECENT_MODELS
"""Response models kept per helper, the recent ones only (``intellagent.llm.types.RECENT_MODELS``);
instructor's own OpenAI tool schema cache (256 classes) is bounded the same way. A clear-all
bound of 1,024 kept up to 1,024 of them alive."""


def _memo_by_class(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    cached = functools.lru_cache(maxsize=MAX_ENTRIES)(fn)  # an exception is not cached

    @functools.wraps(fn)
    def wrapper(model: Any) -> Any:
        return cached(model) if inspect.isclass(model) else fn(model)

    return wrapper


MARKERS = ("__async_validator__", "__async_model_validator__")
"""The attributes by which instructor marks its async validators."""


def _checked_as(model: Any) -> Any:
    """The class whose check for async validators stands for ``model``'s: its only base, for a
    pydantic model that adds no field and no marked member to it (a per-call subclass that only
    sets a class attribute), and so on up."""
    while inspect.isclass(model) and len(model.__bases__) == 1 and hasattr(model, "model_fields"):
        base = model.__bases__[0]
        fields = getattr(base, "model_fields", None)
        if fields is None or {n: f.annotation for n, f in model.model_fields.items()} != \
                {n: f.annotation for n, f in fields.items()}:
            break
        members = [getattr(m, "__func__", m) for m in vars(model).values()]
        if any(getattr(m, key, None) is not None for m in members for key in MARKERS):
            break
        model = base
    return model


def _memo_by_checked_class(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    memo = _memo_by_class(fn)
    by_class = functools.lru_cache(maxsize=MAX_ENTRIES)(lambda model: memo(_checked_as(model)))

    @functools.wraps(fn)
    def wrapper(model: Any) -> Any:
        return by_class(model) if inspect.isclass(model) else fn(model)

    return wrapper


def _rebounded(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An lru-cached helper of instructor's (``fn``) cached in a bound of :data:`MAX_ENTRIES`
    instead of its own (its function, cached anew)."""
    return functools.lru_cache(maxsize=MAX_ENTRIES)(getattr(fn, "__wrapped__", fn))


def _memo_by_text(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(text, *rest)`` memoized by its arguments (all of them hashable: a docstring and a
    style); the parsed docstring is only read by its callers."""
    return functools.lru_cache(maxsize=MAX_ENTRIES)(fn)


TARGETS = (("instructor.v2.core.response_model", "prepare_response_model", _memo_by_class),
           ("instructor.v2.validation.async_validators", "reject_async_validators", _memo_by_checked_class),
           ("instructor.v2.providers.openai.schema", "generate_openai_schema", _rebounded),
           ("docstring_parser", "parse", _memo_by_text))

_MEMOS: dict[tuple[str, str], Callable[..., Any]] = {}
"""The wrapper of each target, made once (a target's own module may keep its original)."""

EAGER = ("instructor.v2.providers.openai.schema",)
"""instructor modules loaded on their first use, imported here so that their references are
patched too (the OpenAI tool schema's docstring parse)."""


def apply() -> int:
    """Point every loaded instructor module at the wrapped helpers; returns how many
    references now use them."""
    for name in EAGER:
        try:
            importlib.import_module(name)
        except ImportError:  # another instructor layout: that reference stays as it is
            pass
    while True:  # again when a pass loaded more of instructor (a package's lazy __getattr__)
        loaded = len(sys.modules)
        replaced = _patch_loaded()
        if len(sys.modules) == loaded:
            return replaced


def _patch_loaded() -> int:
    replaced = 0
    for module_name, attr, wrap in TARGETS:
        home = sys.modules.get(module_name)
        current = getattr(home, attr, None) if home else None
        if current is None:
            continue
        original = getattr(current, "__intellagent_memo__", current)
        memo = _MEMOS.get((module_name, attr))
        if memo is None or memo.__intellagent_memo__ is not original:  # type: ignore[attr-defined]
            memo = _MEMOS[module_name, attr] = wrap(original)
            memo.__intellagent_memo__ = original  # type: ignore[attr-defined]
        for name, module in list(sys.modules.items()):
            if (name == "instructor" or name.startswith("instructor.")) and module is not None:
                value = getattr(module, attr, None)
                if value is original or value is memo:
                    if value is original:
                        setattr(module, attr, memo)
                    replaced += 1
    return replaced
