"""Provider faults, sorted by what the LLM layer does about them."""

from __future__ import annotations

from intellagent.errors import IntellagentError


class ProviderError(Exception):
    """A call that failed; ``transient`` ones are retried with back-off."""

    transient = False
    kind = "error"


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
    request the same way ``limit`` times rejects it, which is not a passing fault (a 502/503/504
    may still pass)."""

    def __init__(self, limit: int = 3) -> None:
        self.limit = limit
        self.same = 0
        self.last = ""

    def permanent(self, error: ProviderError) -> ProviderError | None:
        """A permanent error in place of ``error`` once it has repeated ``limit`` times."""
        if not (isinstance(error, ServerError) and str(error).startswith("500 ")):
            return None
        self.same = self.same + 1 if str(error) == self.last else 1
        self.last = str(error)
        if self.same < self.limit:
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
    """The model's output did not fit the response model, even after the validation retries."""

    kind = "invalid-output"


class RequestRejected(ProviderError):
    """A 4xx other than 429: asking again will not help (bad key, unknown model, bad request)."""

    kind = "rejected"


class RealModelForbidden(IntellagentError):
    """A request to a non-local model while ``INTELLAGENT_OFFLINE`` is set (always, in tests)."""
