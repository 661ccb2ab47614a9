"""Secrets kept out of every text IntellAgent stores or reports: the values of the environment
variables that settings name as keys (a header's value with and without its scheme), any
``Authorization`` or bearer value, and a key in a URL's query (``?key=``, ``&api_key=``).

Apply a :class:`Redactor` where a text that may echo a request is made (a server's error body
quotes the key it refused), so nothing downstream (the store, notes, reports, logs) can carry it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterable
from urllib.parse import quote

MASK = "[redacted]"
MIN_SECRET = 6
"""Shorter values are not taken for secrets: masking every "abc" would garble the text, and a
key that short is no secret."""

_HEADERS = re.compile(r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key)(\s*[:=]\s*)"
                      r"(?:(bearer|basic|token)\s+)?[^\s,;\"'}]+")
_BEARER = re.compile(r"(?i)\b(bearer|token)(\s+)[A-Za-z0-9._~+/=\-]{8,}")
_SCHEME = re.compile(r"(?i)^(bearer|basic|token)\s+")
_QUERY = re.compile(r"(?i)([?&](?:api[-_]?key|key|access[-_]?token|token|sig|signature)=)[^&\s#\"']+")


class Redactor:
    """Masks known secret values and authorization headers in text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        variants: set[str] = set()
        secrets = list(secrets)
        # a header's value ("Bearer sk-...") is echoed as often without its scheme
        secrets += [_SCHEME.sub("", s) for s in secrets if s and _SCHEME.match(s)]
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET:
                # as it is, and as a JSON string or a URL would quote it
                variants |= {secret, json.dumps(secret)[1:-1], quote(secret, safe="")}
        # longest first, so a secret that contains another is masked whole
        self._pattern = re.compile("|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True))) \
            if variants else None

    @classmethod
    def from_env(cls, names: Iterable[str]) -> "Redactor":
        """The values of the environment variables ``names`` (those that are set)."""
        return cls(os.environ.get(name, "") for name in set(names))

    def known(self, text: str | None) -> str | None:
        """``text`` with only the known secret values masked: for prose (an agent's answer),
        where the patterns of headers and bearer tokens would mask ordinary words."""
        if not text or self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def __call__(self, text: str | None) -> str | None:
        if not text:
            return text
        text = self.known(text)
        text = _HEADERS.sub(lambda m: f"{m.group(1)}{m.group(2)}"
                                      f"{(m.group(3) + ' ') if m.group(3) else ''}{MASK}", text)
        text = _QUERY.sub(lambda m: f"{m.group(1)}{MASK}", text)
        return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
