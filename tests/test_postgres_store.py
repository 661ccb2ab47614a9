"""The workspace store on a real PostgreSQL server (started by the ``postgres_server`` fixture
on 127.0.0.1, one per test session; a fresh database per test): migrations, items, claims and
cost; a whole pipeline run through ``--store``; two processes sharing one store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from intellagent.cli import cli
from intellagent.errors import IntellagentError
from intellagent.store import MIGRATIONS, ReadOnlyStore, Store
from intellagent_plugins.reporters.writers import read_report

pytestmark = pytest.mark.slow  # starts a PostgreSQL server

ARGS = [sys.executable, "-m", "intellagent", "run", "retail", "--events", "12",
        "--set", "llm.prices.mock/schema={input: 10.0, output: 30.0}"]


def report_of(workspace: Path) -> dict:
    path = sorted(workspace.glob("runs/*/report.json"), key=lambda p: p.stat().st_mtime)[-1]
    return read_report(path)


def comparable(report: dict) -> dict:
    return {"metrics": report["metrics"], "items": report["items"], "outcomes": report["outcomes"]}


def test_migrations_items_claims_and_cost_on_postgresql(postgres_url):
    store = Store(postgres_url)
    assert store.engine.dialect.name == "postgresql"
    with store.engine.connect() as conn:
        applied = [r[0] for r in conn.exec_driver_sql("SELECT id FROM migrations ORDER BY id")]
    assert applied == [m[0] for m in MIGRATIONS]
    assert Store(postgres_url).migrate() == []  # a second process finds them applied

    run = store.start_run(environment="e", seed=1, config={"x": 1})
    store.record_answer(dict(run_id=run, stage="s", role="r", model="m", provider="p",
                             request_hash="h1", kind="structured", item_key="k1", outcome="ok",
                             prompt_tokens=3, completion_tokens=4, cost_usd=0.5),
                        cache=dict(request_hash="h1", model="m", kind="structured",
                                   response='{"a": 1}', prompt_tokens=3, completion_tokens=4))
    assert json.loads(store.cached("h1").response) == {"a": 1} and store.cached("h2") is None
    store.put_item(key="k1", step="p/s", status="infra-error", halt=False, note="down",
                   scores="[]", payload="null", value_hash="v0")
    store.record_run_item(run, "s", "E1", "000001/", "k1", "infra-error")
    store.flush()
    store.put_item(key="k1", step="p/s", status="ok", halt=False, note="", scores="[]",
                   payload='{"v": 2}', value_hash="v1")  # an unfinished item is replaced
    store.record_run_item(run, "s", "E1", "000001/", "k1", "ok")
    store.flush()
    assert store.item("k1").status == "ok" and store.item("k1").payload == '{"v": 2}'
    store.put_item(key="k1", step="p/s", status="ok", halt=False, note="", scores="[]",
                   payload='{"v": 3}', value_hash="v2")  # a finished one is never rewritten
    store.flush()
    assert Store(postgres_url).item("k1").value_hash == "v1"
    [row] = list(store.run_items(run, payload=True))
    assert (row["item"], row["status"], row["payload"]) == ("E1", "ok", '{"v": 2}')
    [cost] = store.cost_summary(run)
    assert (cost["calls"], cost["cached"], cost["prompt_tokens"], cost["cost_usd"]) == (1, 0, 3, 0.5)

    other = Store(postgres_url)  # claims hold across connections (processes)
    assert store.claim("k9", "hostA:1:r", 60)
    assert not other.claim("k9", "elsewhere:2:r", 60)
    store.release("k9", "hostA:1:r")
    store.flush()
    assert other.claim("k9", "elsewhere:2:r", 60)


def test_a_whole_pipeline_run_on_postgresql_and_resume(runner, tmp_path, postgres_url):
    ws = ["--workspace", str(tmp_path / "ws"), "--store", postgres_url]
    first = runner.invoke(cli, ["run", "airline", "--events", "6", *ws])
    assert first.exit_code == 0, first.output
    assert not (tmp_path / "ws" / "intellagent.db").exists()  # everything went to PostgreSQL
    report = report_of(tmp_path / "ws")
    assert sum(report["outcomes"].values()) == 6
    store = Store(postgres_url)
    with store.engine.connect() as conn:
        made = conn.exec_driver_sql("SELECT COUNT(*) FROM llm_calls WHERE NOT cached").scalar()
    again = runner.invoke(cli, ["run", "airline", "--events", "6", *ws])
    assert again.exit_code == 0, again.output
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM llm_calls WHERE NOT cached").scalar() == made
    assert comparable(report_of(tmp_path / "ws")) == comparable(report)
    cost = runner.invoke(cli, ["cost", "latest", *ws])
    assert cost.exit_code == 0 and "total" in cost.output
    reference = runner.invoke(cli, ["run", "airline", "--events", "6", "--workspace", str(tmp_path / "sqlite")])
    assert comparable(report_of(tmp_path / "sqlite")) == comparable(report), reference.output


def test_two_processes_share_one_postgresql_store(tmp_path, postgres_url):
    reference = tmp_path / "one"
    assert subprocess.run(ARGS + ["--workspace", str(reference)], capture_output=True, timeout=300).returncode == 0
    env = dict(os.environ, INTELLAGENT_STORE=postgres_url)
    procs = [subprocess.Popen(ARGS + ["--workspace", str(tmp_path / f"w{i}")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in (1, 2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    expected = comparable(report_of(reference))
    assert comparable(report_of(tmp_path / "w1")) == expected == comparable(report_of(tmp_path / "w2"))
    with Store(postgres_url).engine.connect() as conn:
        made = [h for h, in conn.exec_driver_sql("SELECT request_hash FROM llm_calls WHERE NOT cached")]
    duplicated = len(made) - len(set(made))
    assert duplicated <= 3, f"{duplicated} of {len(made)} calls paid twice"


def test_store_urls_are_checked_and_passwords_stay_out_of_yaml(runner, tmp_path):
    pipeline = tmp_path / "p.yaml"
    text = (Path(__file__).resolve().parent.parent / "plugins" / "intellagent" / "pipeline.yaml").read_text()
    pipeline.write_text(text + "store: postgresql://me:secret@db.example/ia\n")
    result = runner.invoke(cli, ["validate", str(pipeline)])
    assert result.exit_code == 2 and "passwords are not accepted" in result.output
    assert "secret" not in result.output
    with pytest.raises(IntellagentError, match="not a usable IntellAgent store") as error:
        Store("postgresql://me:secret@127.0.0.1:1/nothing")
    assert "secret" not in str(error.value)


def _items_under_prefixes(store):
    run = store.start_run(environment="e", seed=1, config={})
    names = ["E_1", "E%1", "E_1/0", "E_1/1", "EX1/0", "E%1/0", "E_10/0", ""]
    for i, name in enumerate(names):
        store.put_item(key=f"k{i}", step="p/s", status="ok", halt=i % 2 == 1, note="", scores="[]",
                       payload=f'{{"i": {i}}}', value_hash=f"v{i}")
        store.record_run_item(run, "t" if "/" in name else "s", name, f"{i:06d}/", f"k{i}", "ok")
    store.flush()
    under = lambda prefix, step=None: [r["item"] for r in store.run_items(run, step, prefix=prefix)]  # noqa: E731
    assert under("E_1") == ["E_1/0", "E_1/1"]  # not EX1/0 (_ is not a wildcard) nor E_10/0
    assert under("E%1") == ["E%1/0"]
    assert under("E_1", "s") == [] and under(None, "s") == ["E_1", "E%1", ""]
    rows = list(store.run_items(run, "t", payload=True))
    assert [(r["item"], r["halt"], r["payload"]) for r in rows][:2] == [("E_1/0", False, '{"i": 2}'),
                                                                         ("E_1/1", True, '{"i": 3}')]
    assert all(type(r["halt"]) is bool and "payload" not in r for r in store.run_items(run))


def test_a_read_only_postgresql_store_serves_the_reading_commands_and_refuses_a_run(runner, tmp_path, postgres_url):
    """A database whose transactions are read-only (a standby, a replica for reports): a run is
    refused in one line (exit 2) before any work; cost and store check read it."""
    ws = ["--workspace", str(tmp_path / "ws"), "--store", postgres_url]
    assert runner.invoke(cli, ["run", "education", "--events", "2", *ws]).exit_code in (0, 3)
    engine = Store(postgres_url).engine
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER DATABASE {engine.url.database} SET default_transaction_read_only = on")
    result = runner.invoke(cli, ["run", "education", "--events", "2", "--seed", "9", *ws])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.stderr.strip().endswith(": the store cannot be written (its server takes read-only transactions "
                                          "only): this command records its work there; give one it may write "
                                          f"(--store) ({ReadOnlyStore.READERS})"), result.stderr
    assert runner.invoke(cli, ["cost", *ws]).exit_code == 0
    check = runner.invoke(cli, ["store", "check", *ws])
    assert check.exit_code == 0 and check.stdout.strip().endswith("read-only here: checked as it is"), check.output
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 1


def test_run_items_under_a_prefix_on_sqlite(tmp_path):
    _items_under_prefixes(Store.for_workspace(tmp_path))


def test_run_items_under_a_prefix_on_postgresql(postgres_url):
    _items_under_prefixes(Store(postgres_url))


def test_reading_commands_open_a_postgresql_store_read_only(runner, tmp_path, postgres_url):
    """cost and report read a server's runs in read-only transactions; a newer schema there is
    refused like a file's."""
    ws = ["--workspace", str(tmp_path / "ws"), "--store", postgres_url]
    assert runner.invoke(cli, ["run", "education", "--events", "2", *ws]).exit_code in (0, 3)
    assert runner.invoke(cli, ["cost", *ws]).exit_code == 0
    assert runner.invoke(cli, ["store", "check", *ws]).stdout.startswith("ok: postgresql+psycopg://")
    with pytest.raises(Exception, match="read-only transaction"):
        Store(postgres_url, read_only=True).set_run_status("x", "done")
    engine = Store(postgres_url).engine
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO migrations VALUES (99, 'later', 0)")
    result = runner.invoke(cli, ["cost", *ws])
    assert result.exit_code == 2 and "this store's schema is at migration 99 (later)" in result.stderr
    with engine.begin() as conn:  # the server is shared by the other tests
        conn.exec_driver_sql("DELETE FROM migrations WHERE id = 99")
