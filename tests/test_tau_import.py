"""``intellagent import tau-bench``: a checkout's domain becomes an environment whose data hashes
like τ-bench's, whose Python task files are read without running them, and whose tasks the
oracle passes."""

from __future__ import annotations

import gzip
import json

import pytest

from intellagent.cli import cli
from tests.conftest import TAU_BENCH

pytestmark = pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")


def py_task(task: dict) -> str:
    actions = ", ".join(f"Action(name={a['name']!r}, kwargs={a['kwargs']!r})" for a in task["actions"])
    return (f"    Task(\n        annotator='0',\n        user_id={task['user_id']!r},\n"
            f"        instruction={task['instruction']!r},\n        actions=[{actions}],\n"
            f"        outputs={task['outputs']!r},\n    ),\n")


def fake_checkout(root, domain, tables, splits):
    """A folder laid out like a τ-bench checkout, made from the shared data set."""
    folder = root / "tau_bench" / "envs" / domain
    (folder / "data").mkdir(parents=True)
    for table in tables:
        (folder / "data" / f"{table}.json").write_bytes(gzip.decompress((TAU_BENCH / domain / f"{table}.json.gz").read_bytes()))
    (folder / "wiki.md").write_text((TAU_BENCH / domain / "policy.md").read_text())
    for split in splits:
        tasks = json.loads((TAU_BENCH / domain / f"tasks_{split}.json").read_text())
        (folder / f"tasks_{split}.py").write_text(
            "from tau_bench.types import Action, Task\n\nTASKS = [\n" + "".join(map(py_task, tasks)) + "]\n")
    return folder


def test_import_validate_and_run(runner, tmp_path):
    fake_checkout(tmp_path / "tau", "retail", ("orders", "products", "users"), ("test", "dev"))
    made = runner.invoke(cli, ["import", "tau-bench", str(tmp_path / "tau"), "--domain", "retail",
                               "--out", str(tmp_path / "envs")])
    assert made.exit_code == 0, made.output
    env = tmp_path / "envs" / "tau-retail"
    assert made.stdout.strip() == f"created {env}"
    assert runner.invoke(cli, ["validate", str(env)]).exit_code == 0
    tasks = json.loads((env / "data" / "tasks_dev.json").read_text())
    assert tasks == json.loads((TAU_BENCH / "retail" / "tasks_dev.json").read_text())

    from intellagent.environment import load_environment

    golden = json.loads((TAU_BENCH / "retail" / "golden_dev.json").read_text())
    assert load_environment(env).seed_database().hash() == golden["initial_hash"]

    result = runner.invoke(cli, ["run", str(env), "--pipeline", "tau-bench", "--tasks", "tasks_dev.json",
                                 "--agent", "tau-oracle", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    assert ": 20 items (20 pass)" in result.stdout


def test_task_files_are_never_executed(runner, tmp_path):
    folder = fake_checkout(tmp_path / "tau", "airline", ("flights", "reservations", "users"), ())
    (folder / "tasks_test.py").write_text("import os\nTASKS = [Task(user_id=os.getcwd())]\n")
    result = runner.invoke(cli, ["import", "tau-bench", str(tmp_path / "tau"), "--domain", "airline",
                                 "--out", str(tmp_path / "envs")])
    assert result.exit_code == 2
    assert "tasks_test.py:2: task files may only hold literals" in result.stderr


def test_not_a_checkout(runner, tmp_path):
    result = runner.invoke(cli, ["import", "tau-bench", str(tmp_path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "no τ-bench airline domain here" in result.stderr
