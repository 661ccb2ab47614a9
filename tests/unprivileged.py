"""Commands run on a workspace that cannot be written, as it is in CI (downloaded as an artefact,
mounted read-only): for root too, which writes whatever the file modes say.

The files are made read-only (``chmod a-w``) and the commands run in a child process without
the capabilities that let root pass over file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
CAP_FOWNER: dropped from its bounding set before it executes Python, so it never has them). The
kernel then refuses root as it refuses any user: the child first proves that it cannot write
there, so a test never passes on a workspace that was writable after all. As a file named here
runs as a script, it is that child: it runs each command with click's test runner and prints
the results as JSON.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

PR_CAPBSET_DROP = 24  # linux/prctl.h
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3  # linux/capability.h


@contextlib.contextmanager
def read_only(*folders: Path) -> Iterator[None]:
    """Every file and folder under ``folders`` without write permission, restored after."""
    paths = [p for folder in folders for p in (folder, *folder.rglob("*"))]
    for path in paths:
        path.chmod(path.stat().st_mode & 0o555)
    try:
        yield
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)


def _drop_capabilities() -> None:
    """In the child, before it executes Python: root's powers over file modes go (needs
    CAP_SETPCAP, which root has unless its container took it)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            os._exit(97)


def invoke(commands: list[list[str]], unwritable: list[Path], tmp: Path) -> list[SimpleNamespace]:
    """Run the CLI ``commands`` in one child process that may write none of ``unwritable``
    (checked first) and whose temporary folder is ``tmp``; each result as click's runner gives
    it (exit_code, stdout, stderr, output)."""
    request = {"commands": [[str(a) for a in c] for c in commands],
               "unwritable": [str(p) for p in unwritable]}
    done = subprocess.run([sys.executable, __file__], input=json.dumps(request), capture_output=True,
                          text=True, env={**os.environ, "TMPDIR": str(tmp)}, timeout=300,
                          preexec_fn=_drop_capabilities if os.geteuid() == 0 else None)
    if done.returncode == 97:
        pytest.skip("root cannot give up CAP_DAC_OVERRIDE here (no CAP_SETPCAP): no read-only "
                    "workspace can be made for it")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert not answer.get("writable"), f"{answer['writable']} could be written: not a read-only workspace"
    return [SimpleNamespace(**r) for r in answer["results"]]


def _can_write(path: Path) -> bool:
    try:
        if path.is_dir():
            with tempfile.TemporaryFile(dir=path):
                return True
        with path.open("r+b"):
            return True
    except OSError:
        return False


def _main() -> None:
    from click.testing import CliRunner

    from intellagent.cli import cli

    request = json.loads(sys.stdin.read())
    for path in map(Path, request["unwritable"]):
        if _can_write(path):
            print(json.dumps({"writable": str(path)}))
            return
    results = []
    for args in request["commands"]:
        result = CliRunner().invoke(cli, args)
        results.append({"args": args, "exit_code": result.exit_code, "stdout": result.stdout,
                        "stderr": result.stderr, "output": result.output,
                        "exception": None if isinstance(result.exception, SystemExit) or result.exception is None
                        else repr(result.exception)})
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    _main()
