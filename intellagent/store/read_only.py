"""A store opened where it may not be written (a workspace downloaded as a CI artefact, mounted
read-only, or another user's): how it is read right, and how a command that must write it is told.

SQLite reads a WAL database read-only (``mode=ro``) only where it can use the WAL index (the
``-shm`` file): one left beside the database, or one it may create there. A store closed
cleanly has neither ``-wal`` nor ``-shm``, so in a folder nobody may write ``mode=ro`` fails
("attempt to write a readonly database"); there the main file holds every row, and it is opened
``immutable=1``. A store left by a killed run keeps rows in its ``-wal`` that the main file
lacks, which ``immutable=1`` would not see: without a ``-shm`` to read them through, the file
and its ``-wal`` are copied into a private folder and read there (sqlite.org/wal.html, "Read-Only
Databases"; sqlite.org/uri.html, ``immutable``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from intellagent.store.connection import BUSY_SECONDS
from intellagent.store.schema import StoreError

SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN = 3, 8, 14
SQLITE_READONLY_DIRECTORY = SQLITE_READONLY | 6 << 8  # the file may not be made in its folder
PG_READ_ONLY_TRANSACTION = "25006"  # a standby, or a database read-only by default


class ReadOnlyStore(StoreError):
    """A command that writes the store was given one it may not write (bad input: exit 2)."""

    READERS = "report, compare, cost, label and store check only read it"

    def __init__(self, why: str, *, file: str | Path | None = None, item: str | None = None,
                 then: str | None = None) -> None:
        fix = "copy the workspace to a folder you may write" if file else "give one it may write (--store)"
        then = then or f"this command records its work there; {fix} ({self.READERS})"
        super().__init__(f"the store cannot be written ({why}): {then}", file=file, item=item)
        self.why = why

    def instead(self, then: str) -> "ReadOnlyStore":
        """The same refusal, saying what this command can do instead."""
        return ReadOnlyStore(self.why, file=self.file, item=self.item, then=then)


def read_only_args(url: str) -> dict[str, Any]:
    """Engine arguments that make every transaction on a server read-only."""
    if url.startswith("postgresql"):
        return {"connect_args": {"options": "-c default_transaction_read_only=on"}}
    return {}


def sqlite_path(url: str) -> Path | None:
    """The file a plain ``sqlite:///FILE`` URL names (None: another database, memory, or a URL
    with its own SQLite query, which is taken as written)."""
    if url.startswith("sqlite:///") and "?" not in url:
        return Path(url.removeprefix("sqlite:///"))
    return None


def read_only_url(url: str) -> tuple[str, Path | None]:
    """The URL that reads the store at ``url`` and never writes beside it, and the private folder
    holding the copy it reads when the store could only be read right from a copy (the caller
    removes it), else None."""
    path = sqlite_path(url)
    if path is None:
        return url, None
    uri = f"sqlite:///file:{path}?mode=ro&uri=true"
    if _reads(path) or not _in_wal_mode(path):  # read as it is; or not ours to work around
        return uri, None
    wal = Path(f"{path}-wal")
    if not wal.exists() or wal.stat().st_size == 0:  # the main file holds every row
        return f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true", None
    scratch = Path(tempfile.mkdtemp(prefix="intellagent-store-"))
    try:  # the file and its -wal read as one: SQLite makes the -shm here
        for source in (path, wal):
            shutil.copyfile(source, scratch / source.name)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return f"sqlite:///file:{scratch / path.name}?mode=ro&uri=true", scratch


def _reads(path: Path) -> bool:
    """Does SQLite read ``path`` with ``mode=ro`` as it lies (False only where it may not make
    what it needs beside it; any other fault is the real open's to report)?"""
    if not path.is_file():
        return True
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_SECONDS)
    except sqlite3.Error as exc:
        return not refused_write(exc)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error as exc:
        return not refused_write(exc)
    finally:
        conn.close()


def _in_wal_mode(path: Path) -> bool:
    """Does the file's header say WAL (bytes 18 and 19 are 2)? Only then is the -wal all that
    the main file may lack (a rollback journal left hot is not read around)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == header[19] == 2


def refused_write(exc: BaseException) -> bool:
    """Is ``exc`` SQLite refusing to write (a read-only file or folder, where it would write the
    store or make its ``-wal`` and ``-shm``)?"""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM)


def cannot_write(exc: BaseException, path: Path | None) -> str | None:
    """Why the store (the SQLite file at ``path``, or a server) cannot be written, when ``exc``
    (raised by a writable open) says so; None when it is another fault (a damaged file, a path
    that does not exist)."""
    cause = getattr(exc, "orig", exc)
    if getattr(cause, "sqlstate", None) == PG_READ_ONLY_TRANSACTION:
        return "its server takes read-only transactions only"
    if path is None or not refused_write(cause):
        return None
    folder = path.parent
    if cause.sqlite_errorcode == SQLITE_READONLY_DIRECTORY:
        return "its folder is read-only"
    if cause.sqlite_errorcode & 0xFF == SQLITE_READONLY:
        return str(cause)
    if folder.is_dir() and not os.access(folder, os.W_OK):  # SQLite could not make the file, its -wal or -shm
        return "its folder is read-only"
    return None
