"""Policy checks an environment declares (``checks:`` in environment.yaml): loaded, validated,
run over a trace of tool calls with the state before each call and the diff."""

from __future__ import annotations

from intellagent.cli import cli
from intellagent.environment import load_environment, run_actions, run_checks

CHECKS = """\
from intellagent.environment import rule_check


@rule_check("own-account", "Only the caller's own account may be credited.")
def own_account(trace):
    return [f"call {a.index} credits {a.arguments['customer_id']}, not the caller"
            for a in trace.calls("add_credit") if a.arguments["customer_id"] != trace.context["customer"]]


@rule_check("gold-only", "Only gold customers may get credit.")
def gold_only(trace):
    for a in trace.calls("add_credit"):
        if a.before.get("customers", a.arguments["customer_id"])["tier"] != "gold":
            return "credit for a customer who is not gold"


@rule_check("one-credit", "Credit is given at most once per conversation.")
def one_credit(trace):
    if len(trace.diff.tables["customers"].changed) > 1 or len(trace.calls("add_credit")) > 1:
        return "credit given twice"
"""


def with_checks(shop, text=CHECKS):
    (shop / "checks.py").write_text(text)
    manifest = shop / "environment.yaml"
    manifest.write_text(manifest.read_text() + "checks: checks.py\n")
    return shop


def test_checks_are_loaded_and_run_over_a_trace(shop):
    env = load_environment(with_checks(shop))
    assert [c.id for c in env.checks] == ["own-account", "gold-only", "one-credit"]
    db = env.seed_database()
    good = run_actions(env.tools, db, [("get_customer", {"customer_id": "c1"}),
                                       ("add_credit", {"customer_id": "c1", "amount": 5})],
                       {"customer": "c1"})
    assert [a.error for a in good.actions] == [False, False]
    assert run_checks(env.checks, good) == []
    assert good.before.get("customers", "c1")["credit"] == 10 and good.after.get("customers", "c1")["credit"] == 15
    assert good.diff.tables["customers"].changed["c1"][0].after == 15

    bad = run_actions(env.tools, env.seed_database(),
                      [("add_credit", {"customer_id": "c1", "amount": 5}),
                       ("add_credit", {"customer_id": "c2", "amount": 5})], {"customer": "c1"})
    failures = {f.check: f for f in run_checks(env.checks, bad)}
    assert set(failures) == {"own-account", "gold-only", "one-credit"}
    assert failures["own-account"].message == "call 1 credits c2, not the caller"
    assert "Only the caller's own account" in failures["own-account"].text()
    # each call sees the state just before it: the second call's snapshot has the first credit
    assert bad.actions[1].before.get("customers", "c1")["credit"] == 15
    assert bad.actions[0].before.get("customers", "c1")["credit"] == 10


def test_a_refused_call_stops_the_trace_and_is_rolled_back(shop):
    env = load_environment(with_checks(shop))
    trace = run_actions(env.tools, env.seed_database(),
                        [("add_credit", {"customer_id": "c1", "amount": 2000}),
                         ("get_customer", {"customer_id": "c1"})])
    assert len(trace.actions) == 1 and trace.actions[0].error
    assert "credit limit exceeded" in trace.actions[0].output
    assert trace.diff.empty
    unknown = run_actions(env.tools, env.seed_database(), [("nope", {})], stop_on_error=False)
    assert unknown.actions[0].error and "unknown tool" in unknown.actions[0].output


def test_a_crashing_check_is_a_failure_not_a_pass(shop):
    env = load_environment(with_checks(shop))
    trace = run_actions(env.tools, env.seed_database(), [("add_credit", {"customer_id": "c1", "amount": 1})],
                        context={})  # no "customer": own-account raises KeyError
    [failure] = run_checks(env.checks, trace)
    assert failure.check == "own-account" and "crashed: KeyError" in failure.message


def test_bad_checks_are_reported_by_validate(shop, runner):
    bad = CHECKS + '\n\n@rule_check("gold-only", "again")\ndef again(trace):\n    return None\n' \
        + '\n\n@rule_check("two-args", "x")\ndef two(trace, extra):\n    return None\n'
    with_checks(shop, bad)
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 2
    assert "rule check id 'gold-only' is used twice" in result.output
    assert "rule check 'two-args' (two) must take one argument" in result.output
    assert "environment.yaml" in result.output


def test_a_checks_module_without_checks_or_missing_is_an_error(shop, runner):
    with_checks(shop, "x = 1\n")
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 2 and "holds no function marked @rule_check" in result.output
    (shop / "checks.py").unlink()
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 2 and "checks: Python file 'checks.py' not found" in result.output


def test_validate_counts_the_checks(shop, runner):
    with_checks(shop)
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 0, result.output
    assert "3 rule checks" in result.output
