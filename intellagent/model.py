"""Base class for every model read from YAML (unknown keys are errors), and the field types
several of them share."""

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError for a port that is no number
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{value}' is not an http:// or https:// URL with a host")
    return value


#: An http(s) URL with a host, kept as the text given (a model's base URL is part of its identity).
HttpURL = Annotated[str, AfterValidator(_http_url)]
