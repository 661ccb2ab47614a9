"""Memoize instructor's per-response-model preparation.

instructor (1.1x, v2 core) rebuilds the response schema class for every call, and so misses its
own cache of the OpenAI tool schema, and walks the model for async validators several times per
call: about 3 ms of CPU a call, more than the HTTP round trip to a local server. Both depend only
on the response model class, so we memoize them by class. Some instructor modules bind these
helpers at import, so every loaded ``instructor`` module's reference is replaced; if a future
instructor renames them, nothing is patched and calls are merely slower.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any, Callable

TARGETS = (("instructor.v2.core.response_model", "prepare_response_model"),
           ("instructor.v2.validation.async_validators", "reject_async_validators"))
_MAX_ENTRIES = 1024  # response models are few; a bound keeps a misuse from growing forever


def _memo_by_class(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    cache: dict[type, Any] = {}

    @functools.wraps(fn)
    def wrapper(model: Any) -> Any:
        if not inspect.isclass(model):
            return fn(model)
        try:
            return cache[model]
        except KeyError:
            result = fn(model)  # an exception (e.g. async validators) is not cached
            if len(cache) >= _MAX_ENTRIES:
                cache.clear()
            cache[model] = result
            return result

    wrapper.__intellagent_memo__ = fn  # type: ignore[attr-defined]
    return wrapper


def apply() -> int:
    """Point every loaded instructor module at the memoized helpers; returns how many
    references now use them."""
    replaced = 0
    for module_name, attr in TARGETS:
        home = sys.modules.get(module_name)
        current = getattr(home, attr, None) if home else None
        if current is None:
            continue
        original = getattr(current, "__intellagent_memo__", current)
        memo = current if current is not original else _memo_by_class(original)
        for name, module in list(sys.modules.items()):
            if (name == "instructor" or name.startswith("instructor.")) and module is not None:
                value = getattr(module, attr, None)
                if value is original or value is memo:
                    if value is original:
                        setattr(module, attr, memo)
                    replaced += 1
    return replaced
