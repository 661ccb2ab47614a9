"""The built-in airline and retail environments load τ-bench's data unchanged and their tools
reproduce τ-bench's end states for every task's ground-truth actions."""

from __future__ import annotations

import gzip
import json

import pytest

from intellagent.environment import load_environment, state_hash
from intellagent.registry import load_registry
from tests.conftest import TAU_BENCH

SPLITS = [("airline", "test", 50), ("retail", "test", 115), ("retail", "dev", 20)]
TABLES = {"airline": ("flights", "reservations", "users"), "retail": ("orders", "products", "users")}

pytestmark = pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")


def _env(domain):
    path = load_registry().resolve("environment", domain).value
    return load_environment(path, data=TAU_BENCH / domain)


@pytest.fixture(scope="module")
def envs():
    return {domain: _env(domain) for domain in TABLES}


@pytest.mark.parametrize("domain", sorted(TABLES))
def test_load_then_dump_gives_back_the_same_json(envs, domain):
    original = {t: json.loads(gzip.decompress((TAU_BENCH / domain / f"{t}.json.gz").read_bytes()))
                for t in TABLES[domain]}
    dump = envs[domain].seed_database().dump()
    assert dump == original
    assert json.dumps(dump, sort_keys=True) == json.dumps(original, sort_keys=True)
    golden = json.loads((TAU_BENCH / domain / "golden_test.json").read_text())
    assert state_hash(dump) == golden["initial_hash"]
    assert envs[domain].seed_database().hash() == golden["initial_hash"]


@pytest.mark.parametrize("domain,split,count", SPLITS)
def test_replaying_ground_truth_gives_the_golden_end_state(envs, domain, split, count):
    env = envs[domain]
    tasks = json.loads((TAU_BENCH / domain / f"tasks_{split}.json").read_text())
    golden = json.loads((TAU_BENCH / domain / f"golden_{split}.json").read_text())
    assert len(tasks) == len(golden["tasks"]) == count
    seed = env.seed_database()
    mismatches = []
    for task, expected in zip(tasks, golden["tasks"]):
        db = seed.copy()
        errors = []
        for action in task["actions"]:
            if action["name"] == "transfer_to_human_agents":
                continue
            before = db.hash()
            result = env.tools[action["name"]].call(db, action["kwargs"])
            if result.error:
                errors.append(action["name"])
                assert db.hash() == before, "a refused call must leave the state unchanged"
        if db.hash() != expected["hash"]:
            mismatches.append(task["index"])
        assert len(errors) == len(expected["gt_errors"]), (task["index"], errors, expected["gt_errors"])
        assert (db.hash() == golden["initial_hash"]) == expected["db_unchanged"]
    assert mismatches == []


def test_faithful_quirks_airline(envs):
    env = envs["airline"]
    db = env.seed_database()
    user_id = next(iter(db.keys("users")))
    out = [env.tools["send_certificate"].call(db, {"user_id": user_id, "amount": 100}).output
           for _ in range(4)]
    assert out[0].startswith("Certificate certificate_3221322 added")
    assert out[3] == ""  # all three fixed ids taken: nothing happens, no error
    assert env.tools["calculate"].call(db, {"expression": "1200"}).output == "1200.0"
    assert env.tools["calculate"].call(db, {"expression": "2 ** 3"}).output == "8.0"
    assert env.tools["calculate"].call(db, {"expression": "abs(2)"}).error
