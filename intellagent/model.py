"""Base class for every model read from YAML (unknown keys are errors), and the field types
several of them share."""

import re
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


_SECRET_PARAMETER = re.compile(r"(?i)(api[-_]?)?key|(access[-_]?)?token|secret|password|sig|signature")


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError for a port that is no number
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{value}' is not an http:// or https:// URL with a host")
    secret = "a password" if parts.password is not None else next(
        (f"'{name}='" for name, _ in parse_qsl(parts.query) if _SECRET_PARAMETER.fullmatch(name)), None)
    if secret:  # the URL is stored with the run and shown in its reports
        raise ValueError(f"'{parts.scheme}://{parts.hostname}...' holds {secret}: secrets are not "
                         "accepted in a URL, which is stored and reported; name an environment "
                         "variable (api_key_env, or headers: {Authorization: {env: NAME}})")
    return value


#: An http(s) URL with a host, kept as the text given (a model's base URL is part of its identity).
HttpURL = Annotated[str, AfterValidator(_http_url)]
