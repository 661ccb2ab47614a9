"""Provider faults, sorted by what the LLM layer does about them."""

from __future__ import annotations

import re
from typing import Any

from intellagent.errors import IntellagentError


class ProviderError(Exception):
    """A call that failed; ``transient`` ones are retried with back-off. ``usage``: the tokens
    the failed attempt cost, when a provider knows them (an answer that did not fit was still
    generated and paid for)."""

    transient = False
    kind = "error"
    usage: Any = None


class RateLimited(ProviderError):
    transient = True
    kind = "rate-limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerError(ProviderError):
    transient = True
    kind = "server-error"


class RepeatedRefusal:
    """Counts identical HTTP 500 answers to one request: a server that answers the very same
    request the same way ``limit`` times most likely rejects it (a 502/503/504 may still pass).
    The structured-mode probe takes that as a mode the server lacks; a model call only says so
    in its error after its configured retries (identical bodies are also what a passing fault
    gives, so they never cut a call's retries)."""

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit
        self.same = 0
        self.last = ""

    def count(self, error: ProviderError) -> int:
        """How many times in a row the server has now answered ``error``'s 500 (0: not a 500)."""
        if not (isinstance(error, ServerError) and str(error).startswith("500 ")):
            self.same, self.last = 0, ""
            return 0
        self.same = self.same + 1 if str(error) == self.last else 1
        self.last = str(error)
        return self.same

    def permanent(self, error: ProviderError) -> ProviderError | None:
        """A permanent error in place of ``error`` once it has repeated ``limit`` times."""
        if self.count(error) < self.limit:
            return None
        refused = ServerError(f"the server answered this request the same way {self.same} "
                              f"times, so it rejects it: {error}")
        refused.transient = False
        return refused


class ConnectionLost(ProviderError):
    transient = True
    kind = "connection"


class RequestTimeout(ProviderError):
    transient = True
    kind = "timeout"


class MalformedResponse(ProviderError):
    """The HTTP body was not the JSON the API promises; asking again usually helps."""

    transient = True
    kind = "malformed-response"


class OutputInvalid(ProviderError):
    """The model's output did not fit the response model, even after the validation retries:
    the model's own fault, not the infrastructure's (status ``invalid-output``)."""

    kind = "invalid-output"


class RequestRejected(ProviderError):
    """A 4xx other than 429: asking again will not help (bad key, unknown model, bad request).
    ``status``: the HTTP status, when there was one."""

    kind = "rejected"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextTooLong(RequestRejected):
    """A request whose prompt is longer than the model's context: the same request fails again,
    so a re-run cannot fix it; a model with a longer context or a shorter prompt can."""

    kind = "context-length"


#: How providers say a prompt is over the model's context: OpenAI, vLLM and LiteLLM ("maximum
#: context length", context_length_exceeded), Anthropic ("prompt is too long"), llama.cpp
#: ("exceeds the available context size"), Gemini ("exceeds the maximum number of tokens").
CONTEXT_WORDS = re.compile(r"(?i)context.length|context.window|prompt is too long|"
                           r"exceeds the (available context|maximum number of tokens)")


def rejected(message: str, status: int | None) -> RequestRejected:
    """A provider's 4xx (not 429) as the LLM layer's error: a context overflow is its own kind."""
    if status == 400 and CONTEXT_WORDS.search(message):
        return ContextTooLong(message, status)
    return RequestRejected(message, status)


def over_context(note: str) -> bool:
    """Whether an item's note says it ended at a prompt longer than its model's context (the
    note holds the failed call's reason, ``context-length: ...``)."""
    return f"{ContextTooLong.kind}: " in note


REFUSALS = {401: "refused the key", 403: "refused the key", 404: "does not know the model"}
"""HTTP statuses after which no call to the endpoint can succeed: the run stops."""


class ModelRefused(IntellagentError):
    """A model endpoint that refuses the key or does not know the model: no call to it can
    succeed, so the run stops at the first one (exit 2)."""


class RealModelForbidden(IntellagentError):
    """A request to a non-local model while ``INTELLAGENT_OFFLINE`` is set (always, in tests)."""


def validation_summary(exc: Exception, limit: int = 1200) -> str:
    """Every error of a pydantic ``ValidationError`` on one line, each as ``field.path: why
    (got 'input')``, shortened to ``limit`` characters; any other exception's first line."""
    errors = getattr(exc, "errors", None)
    try:
        found = errors(include_url=False) if callable(errors) else None
    except TypeError:
        found = None
    if not found:
        lines = str(exc).strip().splitlines()
        return (lines[0] if lines else type(exc).__name__)[:limit]
    parts = []
    for error in found:
        where = ".".join(str(p) for p in error.get("loc", ())) or "(the whole answer)"
        got = error.get("input")
        shown = "" if error.get("type") == "missing" else f" (got {_short_repr(got)})"
        parts.append(f"{where}: {error.get('msg', 'invalid')}{shown}")
    title = getattr(exc, "title", "the answer")
    text = f"{len(found)} validation error{'s' if len(found) != 1 else ''} for {title}: " + "; ".join(parts)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _short_repr(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"
