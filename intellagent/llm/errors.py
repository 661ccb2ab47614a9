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
