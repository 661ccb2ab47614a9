"""README's "Test your own agent": the HTTP agent and the Python agent run as written, with the
commands README gives (the HTTP agent's port is the only thing changed: a free one)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO


def section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## Test your own agent")
    return text[start:text.index("\n## ", start + 3)]


def block(language: str, containing: str) -> str:
    [found] = [b for b in re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S) if containing in b]
    return found


def command(containing: str) -> list[str]:
    line = next(line for line in block("bash", containing).splitlines() if line.startswith("intellagent run"))
    return line.split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def intellagent(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "intellagent", *args[1:], "--workspace", str(cwd / "ws")],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def agent_replies(cwd: Path) -> list[str]:
    report = json.loads(next((cwd / "ws").glob("runs/*/report.json")).read_text())
    return [t["content"] for i in report["items"] if i["step"] == "dialogs"
            for t in i["value"]["turns"] if t["role"] == "assistant" and t["content"]]


def test_the_http_agent_runs_as_written(tmp_path):
    port = free_port()
    (tmp_path / "my_agent_server.py").write_text(block("python", "my_agent_server.py").replace("8000", str(port)))
    server = subprocess.Popen([sys.executable, "my_agent_server.py"], cwd=tmp_path)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        args = [a.replace("8000", str(port)) for a in command("my_agent_server.py &")]
        done = intellagent(args, tmp_path)
    finally:
        server.terminate()
        server.wait()
    assert done.returncode == 0, done.stderr
    replies = agent_replies(tmp_path)
    assert replies and set(replies) == {"We fly to 20 airports."}


def test_the_python_agent_runs_as_written(tmp_path):
    (tmp_path / "my_agent.py").write_text(block("python", "# my_agent.py"))
    done = intellagent(command("agent.with.callable=my_agent.py:agent"), tmp_path)
    assert done.returncode == 0, done.stderr
    replies = agent_replies(tmp_path)
    assert replies and set(replies) == {"We fly to 20 airports."}
