"""README's "Test your own agent" and the docs' page of that name (docs/agents.md): the HTTP agent,
the Python agent and the MCP-loop agent run as written, with the commands they give (an agent
server's port is the only thing changed: a free one); an example both give is the same in both."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO
from intellagent_plugins.reporters.writers import read_report
from tests.docs_pages import fenced, page, readme, section


def sections() -> list[str]:
    return [section(readme(), "## Test your own agent"), page("agents.md")]


def block(language: str, containing: str) -> str:
    """The one block holding ``containing``: README and the docs may both give it, then alike."""
    [found] = {b for text in sections() for b in fenced(text, language) if containing in b}
    return found


def command(containing: str) -> list[str]:
    line = next(line for line in block("bash", containing).splitlines() if line.startswith("intellagent run"))
    return line.split()


def test_readme_and_the_docs_give_the_http_agent_and_its_command_alike():
    readme_section, docs = sections()
    server = [b for b in fenced(readme_section, "python") if "# my_agent_server.py" in b]
    assert server and server[0] in fenced(docs, "python")
    assert command("my_agent_server.py &")  # one command: the block is the same in both


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def intellagent(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "intellagent", *args[1:], "--workspace", str(cwd / "ws")],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def agent_replies(cwd: Path) -> list[str]:
    report = read_report(next((cwd / "ws").glob("runs/*/report.json")))
    return [t["content"] for i in report["items"] if i["step"] == "dialogs"
            for t in i["value"]["turns"] if t["role"] == "assistant" and t["content"]]


def served_agent_replies(tmp_path: Path, script: str, readme_port: str) -> list[str]:
    """Start README's agent server ``script`` on a free port, run README's command on it, and
    return the agent's replies."""
    port = free_port()
    (tmp_path / script).write_text(block("python", script).replace(readme_port, str(port)))
    server = subprocess.Popen([sys.executable, script], cwd=tmp_path)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        args = [a.replace(readme_port, str(port)) for a in command(f"{script} &")]
        done = intellagent(args, tmp_path)
    finally:
        server.terminate()
        server.wait()
    assert done.returncode == 0, done.stderr
    return agent_replies(tmp_path)


def test_the_http_agent_runs_as_written(tmp_path):
    replies = served_agent_replies(tmp_path, "my_agent_server.py", "8000")
    assert replies and set(replies) == {"We fly to 20 airports."}


def test_the_mcp_loop_agent_runs_as_written(tmp_path):
    replies = served_agent_replies(tmp_path, "my_mcp_agent.py", "8001")
    assert replies and set(replies) == {"We fly to 20 airports."}
    report = read_report(next((tmp_path / "ws").glob("runs/*/report.json")))
    calls = [c["name"] for i in report["items"] if i["step"] == "dialogs"
             for t in i["value"]["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]
    assert calls and set(calls) == {"list_all_airports"}  # the agent's own calls, in the transcript


def test_the_python_agent_runs_as_written(tmp_path):
    (tmp_path / "my_agent.py").write_text(block("python", "# my_agent.py"))
    done = intellagent(command("agent.with.callable=my_agent.py:agent"), tmp_path)
    assert done.returncode == 0, done.stderr
    replies = agent_replies(tmp_path)
    assert replies and set(replies) == {"We fly to 20 airports."}
