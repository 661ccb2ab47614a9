"""Tools bound to their specs: argument validation, refusals, crashes, rollback."""

from __future__ import annotations

from intellagent.environment import load_environment


def test_tool_call_reads_and_writes(shop):
    env = load_environment(shop)
    db = env.seed_database()
    result = env.tools["add_credit"].call(db, {"customer_id": "c2", "amount": 5})
    assert not result.error
    assert '"credit": 5' in result.output
    assert db.get("customers", "c2")["credit"] == 5


def test_refusal_rolls_back_writes_made_before_it(shop):
    env = load_environment(shop)
    db = env.seed_database()
    result = env.tools["add_credit"].call(db, {"customer_id": "c1", "amount": 5000})
    assert result.error and result.output == "Error: credit limit exceeded"
    assert not result.crashed
    assert db.get("customers", "c1")["credit"] == 10


def test_arguments_are_validated_against_the_spec(shop):
    env = load_environment(shop)
    db = env.seed_database()
    tool = env.tools["add_credit"]
    for args, fragment in [({"customer_id": "c1"}, "'amount' is a required property"),
                           ({"customer_id": "c1", "amount": 0}, "amount: 0 is less than"),
                           ({"customer_id": "c1", "amount": 1, "x": 1}, None),
                           ("{not json", "not valid JSON"), ("[1]", "must be a JSON object")]:
        result = tool.call(db, args)
        if fragment is None:  # extra arguments: the implementation refuses them with a TypeError
            assert result.error and result.crashed
        else:
            assert result.error and fragment in result.output, result.output
    assert db.get("customers", "c1")["credit"] == 10


def test_a_tool_that_raises_is_reported_not_raised(tmp_path, shop):
    (shop / "impl.py").write_text((shop / "impl.py").read_text().replace(
        'raise ToolError("customer not found")', 'raise KeyError(customer_id)'))
    env = load_environment(shop)
    result = env.tools["get_customer"].call(env.seed_database(), {"customer_id": "zz"})
    assert result.error and result.crashed and "KeyError" in result.output


def test_openai_schema_exposes_the_spec(shop):
    env = load_environment(shop)
    schema = env.tools["add_credit"].openai_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "add_credit"
    assert schema["function"]["parameters"]["required"] == ["customer_id", "amount"]
    assert env.tool_specs[1].action and not env.tool_specs[0].action


def test_prompt_is_used_literally(shop):
    env = load_environment(shop)
    assert "{like_this}" in env.prompt
