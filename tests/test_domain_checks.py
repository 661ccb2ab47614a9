"""The airline and retail environments' rule checks: silent on compliant action sequences, and on
τ-bench's ground truth they flag exactly the tasks whose actions break the stated policy."""

from __future__ import annotations

import json

import pytest

from intellagent.environment import load_environment, run_actions, run_checks
from tests.conftest import TAU_BENCH

# τ-bench ground-truth tasks whose actions break the policy they are graded under:
# airline 10, 27, 34 cancel reservations that are not eligible (economy or basic economy,
# uninsured, booked weeks ago; 27 also has flights that departed), 26 cancels one whose flights
# departed, 19 moves a DTW–LGA round trip to DTW–JFK; retail 64's user id is another customer
# than the one the instruction authenticates.
KNOWN = {("airline", "test"): {10, 19, 26, 27, 34}, ("retail", "test"): {64}, ("retail", "dev"): set()}


@pytest.mark.skipif(not TAU_BENCH.is_dir(), reason="shared/datasets/tau-bench not present")
@pytest.mark.parametrize("domain,split", sorted(KNOWN))
def test_tau_bench_ground_truth_breaks_only_the_known_rules(domain, split):
    env = load_environment(f"environments/{domain}", data=TAU_BENCH / domain)
    flagged = {}
    for task in json.loads((TAU_BENCH / domain / f"tasks_{split}.json").read_text()):
        trace = run_actions(env.tools, env.seed_database(),
                            [(a["name"], a["kwargs"]) for a in task["actions"]],
                            {"user_id": task["user_id"]}, stop_on_error=False)
        failures = run_checks(env.checks, trace)
        trace.close()
        if failures:
            flagged[task["index"]] = sorted({f.check for f in failures})
    assert set(flagged) == KNOWN[(domain, split)], flagged
    if domain == "airline":
        assert flagged[19] == ["same-trip"] and flagged[10] == ["cancel-eligibility"]


def test_environments_declare_their_checks():
    for domain, expected in (("retail", {"own-orders", "one-final-action-per-order", "pending-only"}),
                             ("airline", {"own-reservations", "cancel-eligibility", "basic-economy-no-changes",
                                          "bags-only-added", "compensation-eligibility"})):
        env = load_environment(f"environments/{domain}")
        assert expected <= {c.id for c in env.checks}
        assert all(c.rule for c in env.checks)
