"""Tools bound to their specs: argument validation, refusals, crashes, rollback."""

from __future__ import annotations

import json

from intellagent.environment import load_environment
from tests.conftest import REPO


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


ODD_TOOLS = """\
tools:
  - {name: when, description: d, implementation: odd.py:when}
  - {name: price, description: d, implementation: odd.py:price}
  - {name: tags, description: d, implementation: odd.py:tags}
  - {name: blob, description: d, implementation: odd.py:blob}
  - {name: thing, description: d, implementation: odd.py:thing}
  - {name: leave, description: d, implementation: odd.py:leave}
"""

ODD_IMPL = """\
import datetime, decimal


def when(db):
    return {"at": datetime.datetime(2024, 5, 1, 12, 30), "day": datetime.date(2024, 5, 2)}


def price(db):
    return {"total": decimal.Decimal("12.50"), "count": decimal.Decimal("3")}


def tags(db):
    return {"tags": {"b", "a"}, "pair": (1, 2)}


def blob(db):
    return {"text": b"hello", "raw": b"\\xff\\x00"}


def thing(db):
    return {"lock": object()}


def leave(db):
    import sys
    sys.exit(3)
"""


def odd_env(shop):
    (shop / "tools.yaml").write_text(ODD_TOOLS)
    (shop / "odd.py").write_text(ODD_IMPL)
    return load_environment(shop)


def test_tools_may_return_dates_decimals_sets_and_bytes(shop):
    import json

    env = odd_env(shop)
    db = env.seed_database()
    assert json.loads(env.tools["when"].call(db, {}).output) == {"at": "2024-05-01T12:30:00", "day": "2024-05-02"}
    assert json.loads(env.tools["price"].call(db, {}).output) == {"total": 12.5, "count": 3}
    assert json.loads(env.tools["tags"].call(db, {}).output) == {"tags": ["a", "b"], "pair": [1, 2]}
    assert json.loads(env.tools["blob"].call(db, {}).output) == {"text": "hello", "raw": "/wA="}


def test_anything_else_is_an_error_observation_naming_the_tool(shop):
    env = odd_env(shop)
    db = env.seed_database()
    result = env.tools["thing"].call(db, {})
    assert result.error and result.crashed
    assert result.output.startswith("Error: tool 'thing' returned a value that cannot be sent as JSON")
    left = env.tools["leave"].call(db, {})  # used to end the whole run without a word
    assert left.error and left.output == "Error: tool 'leave' crashed: called sys.exit(3)"


def test_async_implementations_are_refused_at_validate(shop, runner):
    from intellagent.cli import cli

    (shop / "tools.yaml").write_text("tools:\n  - {name: later, description: d, implementation: a.py:later}\n")
    (shop / "a.py").write_text("async def later(db):\n    return 1\n")
    result = runner.invoke(cli, ["validate", str(shop)])
    assert result.exit_code == 2
    assert "implementation of 'later' is async (async def)" in result.stderr
    assert "tools.yaml:2" in result.stderr


def test_meta_carries_a_pipelines_declarations_and_stays_out_of_the_agents_schema(shop):
    tools = shop / "tools.yaml"
    tools.write_text(tools.read_text().replace(
        "  - name: add_credit\n", "  - name: add_credit\n    meta: {auth: true, equivalence: {response: ignore}}\n", 1))
    env = load_environment(shop)
    assert env.tools["add_credit"].spec.meta == {"auth": True, "equivalence": {"response": "ignore"}}
    assert env.tools["get_customer"].spec.meta == {}
    assert "meta" not in json.dumps(env.tools["add_credit"].openai_schema())


def test_airline_flight_searches_select_in_sql_what_the_whole_table_would_give():
    """The searches let SQL pick flights by airport; their answers must be τ-bench's
    definitions over every flight: direct flights, and connections whose first leg arrives
    before the second leaves (the second leg a day later after a "+1" arrival)."""
    from intellagent_environments.airline import tools

    env = load_environment(REPO / "environments" / "airline")
    db = env.seed_database()
    flights = db.all("flights")
    airports = sorted({f["origin"] for f in flights})
    dates = sorted({d for f in flights for d in f["dates"]})[::4]
    direct_found = onestop_found = 0
    for origin in airports:
        for destination in airports:
            for date in dates:
                direct = [tools._flight_on(f, date) for f in flights
                          if (f["origin"], f["destination"]) == (origin, destination)
                          and f["dates"].get(date, {}).get("status") == "available"]
                assert tools.search_direct_flight(db, origin, destination, date) == direct
                onestop = []
                for a in flights:
                    for b in flights:
                        if a["origin"] != origin or b["destination"] != destination or a["destination"] != b["origin"]:
                            continue
                        later = "2024-05-" + str(int(date[-2:]) + 1) if "+1" in a["scheduled_arrival_time_est"] else date
                        if a["scheduled_arrival_time_est"] > b["scheduled_departure_time_est"]:
                            continue
                        if a["dates"].get(date, {}).get("status") == "available" and \
                                b["dates"].get(later, {}).get("status") == "available":
                            onestop.append([{**tools._flight_on(a, date), "date": date},
                                            {**tools._flight_on(b, date), "date": later}])
                assert tools.search_onestop_flight(db, origin, destination, date) == onestop
                direct_found += bool(direct)
                onestop_found += bool(onestop)
    assert direct_found > 10 and onestop_found > 10  # the comparison saw real answers


def test_airline_reservations_must_be_listed_by_their_users():
    from intellagent.environment.validators import validate_database

    env = load_environment(REPO / "environments" / "airline")
    db = env.seed_database()
    assert validate_database(db, env.validators) == []
    reservation = db.keys("reservations")[7]
    owner = db.get("reservations", reservation)["user_id"]
    user = db.get("users", owner)
    user["reservations"] = [None] + [r for r in user["reservations"] if r != reservation]
    db.execute("UPDATE users SET reservations = ? WHERE user_id = ?", (json.dumps(user["reservations"]), owner))
    problems = validate_database(db, env.validators)
    assert f"database: reservation(s) {reservation} are not listed in their user's reservations" in problems
    assert len(problems) == 2  # and the row check names the null entry


def test_airline_reservation_segments_must_name_a_flight_on_a_day_it_flies_on_its_route():
    from intellagent.environment.validators import run_validator

    env = load_environment(REPO / "environments" / "airline")
    db = env.seed_database()
    [check] = [v for v in env.validators if v.kind == "row" and v.table == "reservations"]
    reservation = db.get("reservations", db.keys("reservations")[3])
    segment = reservation["flights"][0]
    flight = db.get("flights", segment["flight_number"])
    assert run_validator(check, reservation, db) is None
    days = set(flight["dates"])

    def broken(**change):
        return run_validator(check, {**reservation, "flights": [{**segment, **change}]}, db)

    assert broken(flight_number="NOPE01") == "flight NOPE01 does not exist"
    missing = next(f"2024-05-{d:02d}" for d in range(1, 32) if f"2024-05-{d:02d}" not in days)
    assert broken(date=missing) == f"flight {segment['flight_number']} does not fly on {missing}"
    assert broken(date=7) == f"flight {segment['flight_number']} does not fly on 7"
    assert broken(origin="XXX") == (f"segment {segment['flight_number']} must go from "
                                    f"{flight['origin']} to {flight['destination']}")
    another = sorted(days)[-1]
    assert broken(date=another) is None  # any day in its dates, whatever its status
