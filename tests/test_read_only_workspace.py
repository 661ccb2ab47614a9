"""A workspace nobody may write (a CI job's downloaded artefact, a read-only mount): the commands
that only read serve it and leave it as it was, those that write their output into it name the
flag that writes elsewhere, and those that write the store refuse it in one line (exit 2), a
workspace left by a killed run (rows only in its -wal) included. Made read-only for root too:
tests/unprivileged.py."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import re
import shlex
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from intellagent.cli import cli
from tests.test_bad_input import assert_one_clean_line
from tests.unprivileged import invoke, read_only


def run_education(ws: Path, seed: str) -> None:
    result = CliRunner().invoke(cli, ["run", "education", "--events", "2", "--seed", seed, "--workspace", str(ws)])
    assert result.exit_code in (0, 3), result.output


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A workspace with two finished runs, its store closed cleanly (no -wal, no -shm)."""
    made = tmp_path_factory.mktemp("made")
    for seed in ("1", "2"):
        run_education(made / "runs", seed)  # this process keeps the store open: copied below
    ws = made / "ws"
    shutil.copytree(made / "runs" / "runs", ws / "runs")
    with contextlib.closing(sqlite3.connect(made / "runs" / "intellagent.db")) as source, \
            contextlib.closing(sqlite3.connect(ws / "intellagent.db")) as copy:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode=WAL")  # as IntellAgent keeps it; the only connection closes it
    assert sorted(p.name for p in ws.iterdir()) == ["intellagent.db", "runs"]
    return ws


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> tuple[Path, list[str]]:
    """A workspace as a run killed before any checkpoint leaves it (its first run in the main
    file, the whole second run only in the -wal: copied while another connection kept it from
    being checkpointed), and its runs' ids."""
    ws = tmp_path_factory.mktemp("crashed") / "ws"
    run_education(ws, "1")
    copy = ws.parent / "copy"
    copy.mkdir()
    holder = sqlite3.connect(ws / "intellagent.db")  # the last connection to close checkpoints
    try:
        holder.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the first run into the main file
        run_education(ws, "2")
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(f"{ws / 'intellagent.db'}{suffix}", f"{copy / 'intellagent.db'}{suffix}")
    finally:
        holder.close()
    return copy, run_ids(ws)


def state(ws: Path) -> tuple[str, list[tuple[str, int]]]:
    """Every row of the store and every file of the workspace (name and size)."""
    conn = sqlite3.connect(f"file:{ws / 'intellagent.db'}?immutable=1", uri=True)
    try:
        rows = hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()
    return rows, sorted((str(p.relative_to(ws)), p.stat().st_size) for p in ws.rglob("*"))


def run_ids(ws: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(ws / "intellagent.db")) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at")]


def labels_agreeing_with_the_judge(ws: Path, path: Path) -> int:
    """A labels file giving each dialog's outcome as the latest run's judge did; its row count."""
    report = json.loads(next(ws.glob(f"runs/{run_ids(ws)[-1]}/report.json")).read_text())
    rows = [(i["item"], "", str(i["status"] == "fail").lower()) for i in report["items"]
            if i["step"] == "verdicts" and i["status"] in ("pass", "fail")]
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([("item", "policy", "violated"), *rows])
    return len(rows)


@pytest.fixture(scope="module")
def served(made, tmp_path_factory) -> SimpleNamespace:
    """Every command run once on a read-only copy of ``made``, in one child process (each starts
    Python and the registry afresh): the results by name, and the workspace before and after."""
    tmp = tmp_path_factory.mktemp("served")
    ws = tmp / "ws"
    shutil.copytree(made, ws)
    first, latest = run_ids(ws)
    out, labels = tmp / "out", tmp / "labels.csv"
    w = ["--workspace", ws]
    commands = {  # they only read
        "cost": ["cost", *w], "report": ["report", "--format", "json,html", "--out", out / "report", *w],
        "compare": ["compare", first, latest, "--out", out, *w], "check": ["store", "check", *w],
        "label": ["label", "--out", out / "label.html", *w],
        "calibrate": ["calibrate", "--labels", labels, "--print-only", "--json", *w],
        "estimate": ["run", "education", "--events", "2", "--seed", "2", "--estimate", *w],
        "export": ["tooltalk", "export", "--out", out / "tooltalk", *w],
        # they write their output into the workspace unless told where
        "report here": ["report", *w], "compare here": ["compare", "latest", *w], "label here": ["label", *w],
        # they write the store
        "run": ["run", "education", "--events", "2", "--seed", "3", *w],
        "resume": ["run", "education", "--events", "2", "--seed", "2", *w],  # the same command again
        "replay": ["replay", "--agent", "openai-tools", *w],
        "mutate": ["mutate", "education", "--events", "2", "--mutants", "refuse-all", *w],
        "graph": ["graph", "education", *w],
        "calibrate and keep": ["calibrate", "--labels", labels, *w]}
    n_labels = labels_agreeing_with_the_judge(ws, labels)
    before = state(ws)
    with read_only(ws):
        results = invoke(list(commands.values()), unwritable=[ws, ws / "intellagent.db", ws / "runs"], tmp=tmp)
    return SimpleNamespace(ws=ws, out=out, first=first, latest=latest, labels=n_labels, before=before,
                           after=state(ws), results=dict(zip(commands, results)))


REFUSED = "the store cannot be written ("
WRITES = ("this command records its work there; copy the workspace to a folder you may write "
          "(report, compare, cost, label and store check only read it)")


def test_a_read_only_workspace_serves_what_reads_it_and_refuses_what_writes_it_in_one_line(served):
    """One test, as every command ran in one child process on one workspace (built once)."""
    r, out, latest = served.results, served.out, served.latest
    # the commands that only read serve it
    for name in ("cost", "report", "compare", "check", "label", "calibrate", "estimate"):
        assert r[name].exit_code == 0, (name, r[name].output, r[name].exception)
    assert r["cost"].stdout.startswith(f"run {latest}\n")
    assert json.loads((out / "report" / "report.json").read_text())["info"]["run_id"] == latest
    assert (out / "report" / "report.html").is_file()
    assert (out / f"compare-{served.first}-{latest}.html").is_file()
    assert "2 run(s)" in r["check"].stdout
    assert r["check"].stdout.strip().endswith("integrity ok; read-only here: checked as it is")
    assert (out / "label.html").is_file()
    found = json.loads(r["calibrate"].stdout)
    assert found["overall"]["n"] == served.labels and found["overall"]["agreement"] == 1.0
    assert "measured" in r["estimate"].stdout  # refined by the workspace's finished run
    assert_one_clean_line(r["export"], "latest", "this run made no conversations")  # it read the run

    # those that write their output into the workspace name the flag that writes elsewhere
    folder = served.ws / "runs" / latest
    assert_one_clean_line(r["report here"], str(folder), "cannot write here (Permission denied): give "
                          "--out FOLDER to write elsewhere")
    assert_one_clean_line(r["compare here"], str(served.ws / "runs"), "cannot write here (Permission "
                          "denied): give --out FOLDER to write elsewhere")
    assert r["compare here"].stdout == ""  # refused before it printed a result its exit code would contradict
    assert_one_clean_line(r["label here"], str(folder / "label.html"), "give --out FILE to write elsewhere")

    # those that write the store refuse it: bad input (exit 2) before any work, no run started
    for name in ("run", "resume", "replay", "mutate", "graph"):
        assert_one_clean_line(r[name], "ws/intellagent.db", REFUSED)
        assert WRITES in r[name].stderr, name
    assert_one_clean_line(r["calibrate and keep"], "ws/intellagent.db", "calibrate keeps its result with "
                          "the run; give --print-only to print it and keep nothing")

    assert served.after == served.before  # not a row, not a file


@pytest.mark.parametrize("shm", [True, False], ids=["with-shm", "without-shm"])
def test_a_workspace_left_by_a_killed_run_reads_right_read_only(crashed, tmp_path, shm):
    """Its second run is only in the -wal: read through the -shm left beside it, or, without
    one, from a private copy of the file and its -wal (removed after)."""
    ws = tmp_path / "ws"
    shutil.copytree(crashed[0], ws)
    first, latest = crashed[1]
    if not shm:
        Path(f"{ws / 'intellagent.db'}-shm").unlink()
    with contextlib.closing(sqlite3.connect(f"file:{ws / 'intellagent.db'}?immutable=1", uri=True)) as conn:
        assert conn.execute("SELECT id FROM runs").fetchall() == [(first,)]  # the main file alone
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    w = ["--workspace", ws]
    with read_only(ws):
        cost, check, report, compare, run = invoke([
            ["cost", *w], ["store", "check", *w], ["report", "--format", "json", "--out", tmp_path / "out", *w],
            ["compare", first, latest, "--out", tmp_path / "out", *w],
            ["run", "education", "--events", "2", "--seed", "3", *w]],
            unwritable=[ws, ws / "intellagent.db", Path(f"{ws / 'intellagent.db'}-wal")], tmp=scratch)
    for result in (cost, check, report, compare):
        assert result.exit_code == 0, (result.args, result.output, result.exception)
    assert cost.stdout.startswith(f"run {latest}\n")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["info"]["run_id"] == latest
    assert "2 run(s)" in check.stdout
    assert_one_clean_line(run, "ws/intellagent.db", REFUSED)  # a file SQLite opened read-only is not taken as writable
    assert not any(scratch.iterdir())  # the private copy is gone


def test_calibrate_on_a_store_it_may_write_beside_reports_it_may_not_prints_its_figures_and_says_what_to_do(
        made, tmp_path):
    """The store writable, the run's report folder not: calibrate computed and kept its result,
    then failed as '.../runs/RUN/tmpXXXX: Permission denied' with nothing printed and no word of
    --print-only or `report --out`. Now the figures are printed, then one line saying what to
    do, exit 2; the command it names writes the reports, the calibration in them."""
    ws = tmp_path / "ws"
    shutil.copytree(made, ws)
    latest = run_ids(ws)[-1]
    labels = tmp_path / "labels.csv"
    n = labels_agreeing_with_the_judge(ws, labels)
    folder = ws / "runs" / latest
    before = sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with read_only(ws / "runs"):
        text, as_json = invoke([["calibrate", "--labels", labels, "--workspace", ws],
                                ["calibrate", "--labels", labels, "--json", "--workspace", ws]],
                               unwritable=[ws / "runs", folder], tmp=scratch)
    for result in (text, as_json):
        assert_one_clean_line(result, str(folder), "cannot write here (Permission denied): the result is kept "
                              "with the run; give --print-only to only print, or write its reports elsewhere: "
                              f"intellagent report {latest} --workspace {ws} --out DIR")
    assert text.stdout.startswith(f"run {latest}: judges against {n} people's label(s): agreement 100% ")
    assert "κ " in text.stdout and "the judge's 'violated' against people's" in text.stdout
    assert json.loads(as_json.stdout)["overall"]["n"] == n  # the figures, whole, before the refusal
    assert sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*")) == before

    command = text.stderr.strip().rpartition("elsewhere: ")[2].replace("DIR", str(tmp_path / "out"))
    assert command.startswith("intellagent ")
    result = CliRunner().invoke(cli, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["info"]["run_id"] == latest and written["calibration"]["overall"]["n"] == n
    assert "id=calibration" in (tmp_path / "out" / "report.html").read_text()


def test_mutate_on_a_store_it_may_write_beside_reports_it_may_not_prints_its_result_and_says_what_to_do(
        made, tmp_path):
    """The store writable, runs/ not: mutate ran the agent and its mutants, then failed as
    '.../runs/RUN: Permission denied' with nothing printed, the agent's run marked failed and
    the mutation result never kept. Now every run and the result are kept in the store, the
    result is printed (terminal or --json), then one line saying what to do, exit 2; the
    command it names writes the agent's report with its Mutants section."""
    ws = tmp_path / "ws"
    shutil.copytree(made, ws)
    before = sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*"))
    runs_before = run_ids(ws)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    mutate = ["mutate", "education", "--events", "2", "--seed", "1", "--mutants", "refuse-all", "--workspace", ws]
    with read_only(ws / "runs"):
        text, as_json = invoke([mutate, [*mutate, "--json"]], unwritable=[ws / "runs"], tmp=scratch)
    made_here = [run for run in run_ids(ws) if run not in runs_before]
    assert len(made_here) == 4  # each command: the agent's run and the mutant's
    agent = re.search(r"^agent as it is: run (\S+):", text.stdout, re.M).group(1)
    json_agent = re.search(r"report (\S+) --workspace", as_json.stderr).group(1)
    assert agent in made_here and json_agent in made_here and agent != json_agent
    for result, run in ((text, agent), (as_json, json_agent)):
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        # the runs' progress tables above it on stderr, as ever; then one line
        [error] = [line for line in result.stderr.splitlines() if line.startswith("error")]
        assert result.stderr.strip().splitlines()[-1] == error
        assert error.startswith(f"error: {ws / 'runs' / run}: cannot write here (Permission denied): the runs "
                                "and the mutation result are kept in the store; write the agent's report, with "
                                f"it, elsewhere: intellagent report {run} --workspace {ws} --out DIR"), error
    assert "  refuse-all: " in text.stdout and "mutation score: " in text.stdout
    assert "refuse-all" in json.loads(as_json.stdout)  # the result, whole, before the refusal
    assert sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*")) == before
    with contextlib.closing(sqlite3.connect(ws / "intellagent.db")) as conn:
        statuses = dict(conn.execute("SELECT id, status FROM runs"))
    assert all(statuses[run] == "done" for run in made_here), statuses

    command = text.stderr.strip().partition("elsewhere: ")[2].partition("; ")[0].replace("DIR", str(tmp_path / "out"))
    result = CliRunner().invoke(cli, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["info"]["run_id"] == agent and "refuse-all" in json.dumps(written["mutation"])
    assert "refuse-all" in (tmp_path / "out" / "report.html").read_text()


def calls(ws: Path) -> int:
    with contextlib.closing(sqlite3.connect(ws / "intellagent.db")) as conn:
        return conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]


def refused_beside_and_elsewhere(made: Path, tmp_path: Path, command: list[str], *, store_copied: bool) -> tuple:
    """``command`` with runs/ read-only beside a store it may write, and in a read-only workspace
    whose store is elsewhere (--store; a copy of the made one, or a new one): each refused in
    one line naming that runs/, nothing printed, no run and no model call in the workspace's
    store. Returns the store kept elsewhere, and the workspace's (runs, calls) before."""
    ws = tmp_path / "ws"
    shutil.copytree(made, ws)
    bare = tmp_path / "bare"  # the workspace of a store kept elsewhere
    (bare / "runs").mkdir(parents=True)
    store = tmp_path / "store" / "intellagent.db"
    store.parent.mkdir()
    if store_copied:
        shutil.copyfile(ws / "intellagent.db", store)
    before = run_ids(ws), calls(ws)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with read_only(ws / "runs"), read_only(bare):
        beside, elsewhere = invoke([[*command, "--workspace", ws],
                                    [*command, "--workspace", bare, "--store", f"sqlite:///{store}"]],
                                   unwritable=[ws / "runs", bare, bare / "runs"], tmp=scratch)
    for result, folder in ((beside, ws / "runs"), (elsewhere, bare / "runs")):
        assert_one_clean_line(result, str(folder), "cannot write here (Permission denied): nothing was run, as the "
                              "run writes its reports here: make it writable, or give --workspace a folder you may write")
        assert result.stdout == ""
    assert (run_ids(ws), calls(ws)) == before
    return store, before


def test_a_run_whose_reports_cannot_be_written_is_refused_before_it_pays_for_anything(made, tmp_path):
    """runs/ read-only beside a store it may write, or a read-only workspace whose store is
    elsewhere (--store): the whole run went through, then failed as '.../runs/RUN: Permission
    denied' with nothing printed and the run marked failed. Now it is refused in one line before
    the run starts: no run, no model call."""
    store, _ = refused_beside_and_elsewhere(made, tmp_path, ["run", "airline", "--events", "2", "--model", "mock/demo"],
                                            store_copied=False)
    assert run_ids(store.parent) == [] and calls(store.parent) == 0


def kept_and_told(result, folder: Path, ws: Path, resumed: str, before: list, out: Path) -> dict:
    """A run (or replay) whose report folder it found it may not write only at the end: exit 2,
    its progress table on stderr as ever then one line naming the command that writes its
    reports elsewhere, no report listed or written, the run kept done; that command writes
    them. Returns the report.json it wrote."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert result.stderr.strip().splitlines()[-1] == error
    assert error == (f"error: {folder}: cannot write here (Permission denied): the run is kept in the store; "
                     f"write its reports elsewhere: intellagent report {resumed} --workspace {ws} --out DIR")
    assert "report: " not in result.stdout
    assert sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*")) == before
    with contextlib.closing(sqlite3.connect(ws / "intellagent.db")) as conn:
        assert dict(conn.execute("SELECT id, status FROM runs"))[resumed] == "done"
    command = error.partition("elsewhere: ")[2].replace("DIR", str(out))
    written = CliRunner().invoke(cli, shlex.split(command)[1:])
    assert written.exit_code == 0, written.output
    report = json.loads((out / "report.json").read_text())
    assert report["info"]["run_id"] == resumed
    return report


def test_a_run_whose_report_folder_cannot_be_written_after_all_keeps_the_run_prints_it_and_says_what_to_do(tmp_path):
    """A resumed run rewrites its first run's report folder, which it may not write (runs/ it
    may: the check before the run holds): the run went through and failed as '.../runs/RUN:
    Permission denied', marked failed, its summary unprinted. Now the run is kept in the store
    (done), its summary printed, then one line naming the `intellagent report RUN --out DIR`
    that writes its reports, exit 2."""
    ws = tmp_path / "ws"
    args = ["run", "airline", "--events", "4", "--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}",
            "--workspace", str(ws)]
    stopped = CliRunner().invoke(cli, [*args, "--budget", "0.5"])
    assert stopped.exit_code == 3, stopped.output  # stopped by the budget: the next run resumes it
    [first] = run_ids(ws)
    folder = ws / "runs" / first
    before = sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with read_only(folder):
        [result] = invoke([[*args, "--budget", "1000"]], unwritable=[folder], tmp=scratch)
    [_, resumed] = run_ids(ws)
    assert result.stdout.startswith(f"run {resumed}: 4 items (") and "\n  success " in result.stdout
    kept_and_told(result, folder, ws, resumed, before, tmp_path / "out")


def test_a_replay_whose_reports_cannot_be_written_is_refused_before_it_pays_for_anything(made, tmp_path):
    """As `run`: runs/ read-only beside a store it may write, or a read-only workspace whose store
    is elsewhere (--store): the whole replay went through, then failed as '.../runs/RUN:
    Permission denied', the replay marked failed. Now it is refused in one line before it
    starts: no run, no model call."""
    replay = ["replay", "latest", "--no-cache"]  # every call a paid one, were it made
    store, before = refused_beside_and_elsewhere(made, tmp_path, replay, store_copied=True)
    assert (run_ids(store.parent), calls(store.parent)) == before


def test_a_replay_whose_report_folder_cannot_be_written_after_all_keeps_the_run_prints_it_and_says_what_to_do(
        tmp_path):
    """A resumed replay rewrites the report folder of the replay it resumes, which it may not
    write (runs/ it may): it went through and failed as '.../runs/RUN: Permission denied',
    marked failed, nothing printed. Now the replay is kept in the store (done), its summary
    printed, then one line naming the `intellagent report RUN --out DIR` that writes its
    reports, exit 2."""
    ws = tmp_path / "ws"
    recorded = CliRunner().invoke(cli, ["run", "airline", "--events", "4", "--workspace", str(ws)])
    assert recorded.exit_code == 0, recorded.output
    [recorded_id] = run_ids(ws)
    args = ["replay", recorded_id, "--no-cache", "--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}",
            "--workspace", str(ws)]
    stopped = CliRunner().invoke(cli, [*args, "--set", "llm.budget_usd=0.5"])
    assert stopped.exit_code == 3, stopped.output  # stopped by the budget: the next replay resumes it
    [_, first] = run_ids(ws)
    folder = ws / "runs" / first
    before = sorted((str(p), p.stat().st_size) for p in (ws / "runs").rglob("*"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with read_only(folder):
        [result] = invoke([[*args, "--set", "llm.budget_usd=1000"]], unwritable=[folder], tmp=scratch)
    [*_, resumed] = run_ids(ws)
    assert resumed != first
    assert result.stdout.startswith(f"replay of run {recorded_id} as run {resumed}: 4 dialog(s), ")
    assert "\n  success " in result.stdout and f"compare: intellagent compare {recorded_id} {resumed}" in result.stdout
    written = kept_and_told(result, folder, ws, resumed, before, tmp_path / "out")
    assert written["info"]["provenance"]["replays"] == recorded_id
