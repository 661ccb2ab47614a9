"""A third-party pipeline package, written as its author would: its own distribution and entry
point, its own artefact types, a chain of generator steps, a nested fan-out, an input from an
enclosing fan-out, a gather, per-item scores and its own metric. It runs through the CLI like the
built-in pipelines, and a run killed at any moment resumes without redoing a finished item."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from intellagent_plugins.reporters.writers import read_report

pytestmark = pytest.mark.slow  # installs a package, kills and resumes runs

PLUGIN = '''
"""Catalogue → conversations → drafts → polished → calls (nested) → replays → summary."""
import asyncio
import os

from pydantic import BaseModel, Field

from intellagent import hookimpl
from intellagent.metrics import Column, Metric, MetricResult
from intellagent.model import StrictModel
from intellagent.steps import (PASS_FAIL, Critic, Extractor, Generator, Output, Sampler, Score, ScoreSpec,
                               Simulator)

DELAY = float(os.environ.get("THIRDPARTY_DELAY", "0"))


def log(ctx):
    path = os.environ.get("THIRDPARTY_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{ctx.step} {ctx.key}\\n")


class Catalogue(BaseModel):
    tools: list[str]


class Conversation(BaseModel):
    id: str
    calls: list[str]


class Draft(BaseModel):
    id: str
    calls: list[str]
    text: str


class Polished(Draft):
    words: int


class Call(BaseModel):
    id: str
    tool: str


class CallResult(BaseModel):
    conversation: str
    call: str
    tool: str
    matched: bool


class Summary(BaseModel):
    matched: int
    total: int


class Text(BaseModel):
    text: str = Field(min_length=1)


class ReadCatalogue(Extractor):
    name = "catalogue"
    output = Catalogue

    def run(self, ctx):
        log(ctx)
        return Catalogue(tools=sorted(ctx.env.tools) or ["noop"])


class SampleConfig(StrictModel):
    conversations: int = 6
    max_calls: int = Field(default=3, ge=1)


class SampleConversations(Sampler):
    name = "conversations"
    Config = SampleConfig
    inputs = {"catalogue": Catalogue}
    output = list[Conversation]

    def run(self, ctx, catalogue):
        log(ctx)
        rng = ctx.rng("sample")
        return [Conversation(id=f"C{i}", calls=[rng.choice(catalogue.tools)
                                                for _ in range(rng.randint(1, self.config.max_calls))])
                for i in range(self.config.conversations)]


class WriteDraft(Generator):
    name = "write-draft"
    inputs = {"conversation": Conversation}
    output = Draft
    roles = {"writer": "drafts a conversation around its calls"}

    async def run(self, ctx, conversation):
        log(ctx)
        await asyncio.sleep(DELAY)
        out = await ctx.llm.structured([{"role": "user", "content": f"Write {conversation.calls}"}],
                                       Text, role="writer")
        if not out.ok:
            return Output(value=Draft(id=conversation.id, calls=[], text=""), status="infra-error")
        return Draft(id=conversation.id, calls=conversation.calls, text=out.value.text)


class Polish(Generator):
    name = "polish"
    inputs = {"draft": Draft}
    output = Polished
    roles = {"editor": "polishes a draft"}

    async def run(self, ctx, draft):
        log(ctx)
        await asyncio.sleep(DELAY)
        out = await ctx.llm.structured([{"role": "user", "content": f"Polish: {draft.text}"}],
                                       Text, role="editor")
        text = out.value.text if out.ok else draft.text
        return Polished(**draft.model_dump() | {"text": text}, words=len(text.split()))


class SplitCalls(Generator):
    name = "split-calls"
    inputs = {"polished": Polished}
    output = list[Call]

    def run(self, ctx, polished):
        log(ctx)
        return [Call(id=str(i), tool=t) for i, t in enumerate(polished.calls)]


class Replay(Simulator):
    name = "replay"
    inputs = {"call": Call, "conversation": Conversation}
    output = CallResult
    statuses = PASS_FAIL
    scores = {"call": ScoreSpec(statuses=PASS_FAIL, labels=["tool", "conversation"]),
              **{n: ScoreSpec(value=True) for n in ("matches", "predictions", "truth")}}

    def run(self, ctx, call, conversation):
        log(ctx)
        matched = ctx.rng("match").random() < 0.7
        status = "pass" if matched else "fail"
        labels = {"tool": call.tool, "conversation": conversation.id}
        return Output(value=CallResult(conversation=conversation.id, call=call.id, tool=call.tool,
                                       matched=matched), status=status,
                      scores=[Score(name="call", status=status, labels=labels),
                              Score(name="matches", value=float(matched), labels=labels),
                              Score(name="predictions", value=1.0, labels=labels),
                              Score(name="truth", value=1.0, labels=labels)])


class Summarise(Critic):
    name = "summarise"
    inputs = {"results": list[CallResult]}
    output = Summary

    def run(self, ctx, results):
        log(ctx)
        return Summary(matched=sum(r.matched for r in results), total=len(results))


class ShareConfig(StrictModel):
    score: str = "call"


class MatchShare(Metric):
    name = "match-share"
    Config = ShareConfig

    def compute(self, data):
        counts = {}
        for _, score in data.scores(self.config.score):
            c = counts.setdefault(score.labels["conversation"], [0, 0])
            c[0] += score.status == "pass"
            c[1] += 1
        total = sum(c[1] for c in counts.values())
        share = sum(c[0] for c in counts.values()) / total if total else None
        return MetricResult(name=self.name, title="Match share by conversation",
                            headline=f"match share {share:.3f}", values={"share": share},
                            columns=[Column(key="conversation", label="conversation"),
                                     Column(key="share", label="share", kind="percent")],
                            rows=[{"conversation": k, "share": v[0] / v[1]} for k, v in sorted(counts.items())])


@hookimpl
def register_stages(register):
    for step in (ReadCatalogue, SampleConversations, WriteDraft, Polish, SplitCalls, Replay, Summarise):
        register(step)


@hookimpl
def register_metrics(register):
    register("match-share", MatchShare)


@hookimpl
def register_pipelines(register):
    from pathlib import Path
    register("flow", Path(__file__).parent / "flow.yaml")
'''

FLOW = """\
description: a third-party pipeline
llm:
  default: {model: mock/schema}
steps:
  catalogue: {use: thirdparty/catalogue}
  conversations: {use: thirdparty/conversations, from: catalogue, with: {conversations: 12}}
  drafts: {use: thirdparty/write-draft, each: conversations}
  polished: {use: thirdparty/polish, each: drafts}
  calls: {use: thirdparty/split-calls, each: polished}
  replays: {use: thirdparty/replay, each: calls, from: conversations}
  summary: {use: thirdparty/summarise, from: replays}
metrics:
  share: {use: thirdparty/match-share}
  by-tool: {use: rate, with: {score: call, by: [tool], title: Matches by tool}}
  pr: {use: micro-pr, with: {matched: matches, predicted: predictions, actual: truth}}
params:
  conversations: steps.conversations.with.conversations
report: [html, json, csv]
seed: 3
"""


def install(root: Path) -> Path:
    """The package and a dist-info declaring its entry point, as pip would leave them."""
    pkg = root / "thirdparty"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(textwrap.dedent(PLUGIN))
    (pkg / "flow.yaml").write_text(FLOW)
    info = root / "thirdparty-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[intellagent]\nthirdparty = thirdparty.plugin\n")
    return root


def command(root: Path, *args: str, workspace: Path | None = None, log: Path | None = None,
            delay: float = 0) -> tuple[list[str], dict]:
    """The CLI in a fresh process that sees the package through PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(root), THIRDPARTY_DELAY=str(delay))
    if log is not None:
        env["THIRDPARTY_LOG"] = str(log)
    where = ["--workspace", str(workspace)] if workspace is not None else []
    return [sys.executable, "-m", "intellagent", *args, *where], env


def run(root: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    argv, env = command(root, *args, **kwargs)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def report_of(workspace: Path) -> dict:
    path = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)[-1]
    return read_report(path)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("site"))


def test_a_third_party_pipeline_validates_and_runs(package, tmp_path):
    ws = tmp_path / "ws"
    valid = run(package, "validate", "thirdparty/flow")
    assert valid.returncode == 0, valid.stderr
    assert "model role writer: mock/schema (drafts a conversation around its calls)" in valid.stdout

    done = run(package, "run", "airline", "--pipeline", "thirdparty/flow", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert "match share" in done.stdout
    report = report_of(ws)
    assert report["info"]["pipeline"] == "thirdparty/flow"
    assert report["info"]["models"] == {"editor": "mock/schema", "writer": "mock/schema"}
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["drafts"]["items"] == steps["polished"]["items"] == 12
    calls = steps["calls"]["items"]
    replays = [i for i in report["items"] if i["step"] == "replays"]
    conversations = next(i for i in report["items"] if i["step"] == "conversations")["value"]
    assert len(replays) == sum(len(c["calls"]) for c in conversations) and calls == 12
    for r in replays:  # nested keys; each replay met its own conversation
        conversation, call = r["item"].split("/")
        assert r["value"]["conversation"] == conversation and r["value"]["call"] == call
    summary = next(i for i in report["items"] if i["step"] == "summary")["value"]
    assert summary["total"] == len(replays)
    assert summary["matched"] == sum(r["value"]["matched"] for r in replays)
    share = report["metrics"]["share"]["values"]["share"]
    assert share == pytest.approx(summary["matched"] / summary["total"])
    assert report["metrics"]["pr"]["values"]["precision"] == pytest.approx(share, abs=1e-4)
    by_tool = report["metrics"]["by-tool"]["rows"]
    assert sum(r["rate"]["n"] for r in by_tool) == len(replays)
    html = (Path(next(l[8:] for l in done.stdout.splitlines() if l.endswith(".html")))).read_text()
    assert "id='share'" in html and "Match share by conversation" in html and "Matches by tool" in html

    more = run(package, "run", "airline", "--pipeline", "thirdparty/flow", "--conversations", "14",
               workspace=ws)
    assert more.returncode == 0, more.stderr
    assert {s["name"]: s["items"] for s in report_of(ws)["steps"]}["drafts"] == 14


def test_a_gate_on_a_value_of_a_metric_that_declares_none_is_checked_by_the_run(package, tmp_path):
    """match-share declares no values: a gate naming one it lacks fails once the run tells, as
    ever; a value a built-in metric (micro-pr) cannot give is refused before the run."""
    refused = run(package, "run", "airline", "--pipeline", "thirdparty/flow", "--fail-under", "pr.precison=0",
                  workspace=tmp_path / "refused")
    assert refused.returncode == 2 and not (tmp_path / "refused").exists()
    assert "gate 'pr.precison >= 0' names value 'precison' of pr, which it cannot give: did you mean " \
           "'precision'?" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    checked = run(package, "run", "airline", "--pipeline", "thirdparty/flow", "--conversations", "3",
                  "--fail-under", "share.shre=0", workspace=tmp_path / "ws")
    assert checked.returncode == 1, checked.stderr
    assert "gate share.shre >= 0: – FAILED (metric 'share' has no 'shre': did you mean 'share'?" in checked.stdout


def _finished_keys(workspace: Path) -> set[str]:
    with sqlite3.connect(workspace / "intellagent.db") as conn:
        return {k for k, in conn.execute("SELECT key FROM items WHERE key NOT LIKE '%~%'")}


def test_kill_and_resume_redoes_no_finished_item(package, tmp_path):
    reference = tmp_path / "reference"
    assert run(package, "run", "airline", "--pipeline", "thirdparty/flow",
               workspace=reference).returncode == 0

    ws = tmp_path / "ws"
    log = tmp_path / "computed.log"
    # one item at a time (the executor does not change what is made): the run takes seconds, so a
    # loaded machine cannot let it finish between two looks at the store
    argv, env = command(package, "run", "airline", "--pipeline", "thirdparty/flow",
                        "--executor", "local", "--set", "executor.with.items_in_flight=1", workspace=ws,
                        log=log, delay=0.15)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    finished: set[str] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            finished = _finished_keys(ws)
            if len(finished) >= 8:
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = _finished_keys(ws)
    assert 3 <= len(finished) < len(_finished_keys(reference)), "kill the run half-way"
    before = set(log.read_text().split("\n"))

    log.write_text("")
    resumed = run(package, "run", "airline", "--pipeline", "thirdparty/flow", workspace=ws, log=log)
    assert resumed.returncode == 0, resumed.stderr
    redone = {line.split()[1] for line in log.read_text().splitlines()}
    assert not redone & finished, "a finished item was computed again"
    assert before and _finished_keys(ws) == _finished_keys(reference)
    a, b = report_of(ws), report_of(reference)
    assert a["metrics"] == b["metrics"] and a["items"] == b["items"]
