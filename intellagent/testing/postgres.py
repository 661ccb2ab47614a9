"""A throwaway PostgreSQL server for tests, on 127.0.0.1 in a temporary folder.

It uses the server binaries of the machine (Debian's ``postgresql`` package puts them in
``/usr/lib/postgresql/VERSION/bin``; elsewhere ``pg_config --bindir`` or ``PATH``). ``initdb``
refuses to run as root, so as root the server runs as the ``postgres`` user the package creates.

    with PostgresServer() as server:
        url = server.create_database("t1")      # postgresql+psycopg://postgres@127.0.0.1:PORT/t1
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
                   if p.split("/")[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def unavailable() -> str | None:
    """Why a server cannot be started here (None when it can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the PostgreSQL driver is not installed (pip install 'intellagent[postgres]')"
    if server_binaries() is None:
        return "no PostgreSQL server binaries (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.folder: Path | None = None
        self.port = 0
        self._as: list[str] = []

    def _run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, **kwargs)

    def start(self) -> "PostgresServer":
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        bin_dir = server_binaries()
        assert bin_dir is not None
        self.folder = Path(tempfile.mkdtemp(prefix="intellagent-pg-"))
        data = self.folder / "data"
        if os.geteuid() == 0:  # initdb refuses root: the package's unprivileged user runs it
            shutil.chown(self.folder, "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        out = self._run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "--no-sync", "-E", "UTF8")
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed: {out.stderr.strip()[:500]}")
        self.port = _free_port()
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        out = self._run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-t", "60",
                        "-l", str(self.folder / "log"), "start")
        if out.returncode != 0:
            log = (self.folder / "log").read_text()[-500:] if (self.folder / "log").exists() else ""
            raise RuntimeError(f"the PostgreSQL server did not start: {out.stderr.strip()[:300]} {log}")
        self._bin = bin_dir
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.folder is None:
            return
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
                  "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

