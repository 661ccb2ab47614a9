"""The errors that reach a user as one clear line instead of a traceback."""

from __future__ import annotations

import difflib
import errno
from pathlib import Path
from typing import Iterable


class IntellagentError(Exception):
    """Bad input or configuration: shown as one line naming where, then exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None,
                 item: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.item = item

    @property
    def where(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        if self.item:
            parts.append(self.item)
        return ": ".join(parts)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class ConfigError(IntellagentError):
    """A YAML or manifest file that does not parse or does not fit its model."""


class EnvironmentError_(IntellagentError):
    """An environment whose parts do not agree (tools, schema, seed data, validators)."""


class RegistryError(IntellagentError):
    """A plugin that fails to load, registers a duplicate, or is asked for and not there."""


class ToolError(Exception):
    """Raised by a tool implementation for a refused call; the agent sees ``Error: <message>``.

    The call's database changes are rolled back.
    """


class ValidationFailed(Exception):
    """Raised by a validator; the message is shown to the model that made the data."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice nearest ``word`` (difflib's ratio of at least 0.6), for an error's "did you
    mean"; None when none is near."""
    found = difflib.get_close_matches(word, list(choices), n=1)
    return found[0] if found else None


def listed(names: Iterable[str], limit: int = 20) -> str:
    """``names`` joined for an error line, at most ``limit`` of them and how many more."""
    names = list(names)
    more = f", … {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
"""The errors of writing where one may not (a read-only folder or file system), as against a
fault (a full disk)."""
