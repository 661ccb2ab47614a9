"""symbolic-events: events that can be valid. Linked rows work (a new reservation of a new user,
referred to by symbols inside lists), new rows get fresh identities in the domain's own key
format, the repair loop shows the model its previous answer, each table gets its own budget of
candidate rows, the end state is resolved from symbols; and on the mock model at most 3 % of
events end invalid."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3

import pytest

from intellagent.cli import cli
from intellagent.environment import load_environment
from intellagent.llm import LLM
from intellagent.pipeline import LLMSettings, ModelSettings
from intellagent.testing.harness import run_step
from intellagent_plugins.intellagent.artefacts import EventSpec, Policy, PolicyGraph
from intellagent_plugins.intellagent.generator import Config, SymbolicEvents
from intellagent_plugins.providers.mock import FunctionModel
from tests.conftest import REPO

GRAPH = PolicyGraph(environment="airline", task="Serve airline customers.", flows=["booking"], policies=[
    Policy(id="P1", flow="booking", text="Check the user's identity first.", category="authentication/access control",
           challenge=2),
    Policy(id="P4", flow="booking", text="Never cancel a flown reservation.", category="company policy",
           challenge=4)])
SPEC = EventSpec(id="E0007", policies=["P1", "P4"], target_complexity=6, complexity=6)


def generate(reply, *, config: Config | None = None, env: str = "airline"):
    model = FunctionModel(reply)
    llm = LLM(LLMSettings(default=ModelSettings(model="test/fn")), providers={"test/fn": model})
    environment = load_environment(REPO / "environments" / env)
    out = asyncio.run(run_step(SymbolicEvents(config or Config()), environment, llm=llm,
                               graph=GRAPH, spec=SPEC))
    return out.value, model.history, environment


def scenario(entities, end_state=()):
    return {"scenario": "You are U1 and want to cancel R1.", "user_knowledge": "Your id is U1; reservation R1.",
            "expected": {"P1": "asks for the user id", "P4": "refuses to cancel a flown trip"},
            "entities": entities, "end_state": list(end_state)}


def candidate_index(request, table: str, key: str) -> int:
    text = request.messages[-1]["content"] if "Candidate rows" in request.messages[-1]["content"] \
        else next(m["content"] for m in request.messages if "Candidate rows" in m.get("content", ""))
    section = text.split(f"\n{table}:\n", 1)[1]
    return int(re.search(rf"\[(\d+)\] {re.escape(key)}:", section).group(1))


def first_candidate(request, table: str) -> tuple[int, str]:
    text = next(m["content"] for m in request.messages if "Candidate rows" in m.get("content", ""))
    section = text.split(f"\n{table}:\n", 1)[1]
    index, key = re.search(r"\[(\d+)\] (\S+):", section).groups()
    return int(index), key


def test_a_new_reservation_of_a_new_user_linked_by_symbols():
    def reply(request, model):
        if model.__name__ == "ScenarioDraft":
            return scenario([{"symbol": "U1", "table": "users", "role": "the traveller", "new": True},
                             {"symbol": "R1", "table": "reservations", "role": "their trip", "new": True}],
                            [{"kind": "field-equals", "entity": "R1", "field": "status", "value": "cancelled"},
                             {"kind": "row-unchanged", "entity": "U1"},
                             {"kind": "field-equals", "entity": "Z9", "field": "status", "value": "x"}])
        u, _ = first_candidate(request, "users")
        r, _ = first_candidate(request, "reservations")
        return {"rows": [
            {"template": u, "overrides": {"name": {"first_name": "Noor", "last_name": "Haddad"},
                                          "email": "noor.haddad@example.com"}},
            {"template": r, "key": "NH4X2Q", "overrides": {"user_id": "U1", "passengers": [
                {"first_name": "Noor", "last_name": "Haddad", "dob": "1990-01-01"}]}}]}

    event, history, env = generate(reply)
    assert event.status == "ok", event.error
    symbols = {s.symbol: s for s in event.symbols}
    user_key, reservation_key = symbols["U1"].key, symbols["R1"].key
    assert reservation_key == "NH4X2Q"  # the model's own key, in the domain's format
    assert re.fullmatch(r"[a-z]+_[a-z]+_\d+", user_key) and "e0007" not in user_key.lower()
    rows = {(r.table, r.key): r.record for r in event.rows}
    user = rows[("users", user_key)]
    assert user["reservations"] == [reservation_key]  # listed, nothing inherited from the template
    assert rows[("reservations", reservation_key)]["user_id"] == user_key
    assert user_key in event.brief and "U1" not in event.brief and reservation_key in event.brief
    # the user knows the records involved, by symbol, as they are after the rows were linked
    # (the user lists the new reservation), in json.dumps's text
    facts = {"U1": user, "R1": rows[("reservations", reservation_key)]}
    assert event.user_knowledge.endswith("\n\nRecords involved:\n" +
                                         json.dumps(facts, default=str, ensure_ascii=False))
    # the event's database is valid and finds the new user by the new email
    db = env.database_with(event.rows)
    found = env.tools["get_user_details"].call(db, {"user_id": user_key})
    assert not found.error and "noor.haddad@example.com" in found.output
    assert [e.describe() for e in event.end_state] == [
        f"reservations[{reservation_key}].status becomes 'cancelled'", f"users[{user_key}] is unchanged"]


def test_copies_get_fresh_identities_in_the_shape_of_their_template():
    templates = {}

    def reply(request, model):
        if model.__name__ == "ScenarioDraft":
            return scenario([{"symbol": "U1", "table": "users", "role": "a new customer", "new": True},
                             {"symbol": "R1", "table": "reservations", "role": "a new trip", "new": True}])
        templates["users"] = first_candidate(request, "users")[1]
        templates["reservations"] = first_candidate(request, "reservations")[1]
        return {"rows": [{"template": 0, "overrides": {}}, {"template": 0, "overrides": {}}]}

    event, _, env = generate(reply)
    assert event.status == "ok", event.error
    seed = env.seed_database()
    symbols = {s.symbol: s.key for s in event.symbols}
    rows = {(r.table, r.key): r.record for r in event.rows}
    template_user = seed.get("users", templates["users"])
    user = rows[("users", symbols["U1"])]
    assert symbols["U1"] != templates["users"] and symbols["U1"].rsplit("_", 1)[0] == templates["users"].rsplit("_", 1)[0]
    assert user["email"] != template_user["email"] and "@" in user["email"]
    assert user["reservations"] == []
    reservation = symbols["R1"]
    assert len(reservation) == len(templates["reservations"]) and not seed.has("reservations", reservation)
    owner = rows[("reservations", reservation)]["user_id"]
    assert reservation in rows[("users", owner)]["reservations"]  # its owner lists it


def test_the_repair_loop_shows_the_previous_answer_and_the_complaints():
    answers = []

    def reply(request, model):
        if model.__name__ == "ScenarioDraft":
            return scenario([{"symbol": "R1", "table": "reservations", "role": "the trip", "new": False}])
        answers.append(request.messages)
        if len(answers) == 1:
            return {"rows": [{"template": 0, "overrides": {"passengers": []}}]}
        return {"rows": [{"template": 0, "overrides": {}}]}

    event, _, _ = generate(reply)
    assert event.status == "ok" and event.repairs == 1
    second = answers[1]
    assert second[-2]["role"] == "assistant" and '"passengers":[]' in second[-2]["content"].replace(" ", "")
    assert "between 1 and 9 passengers" in second[-1]["content"]


def test_an_event_that_stays_invalid_says_why():
    def reply(request, model):
        if model.__name__ == "ScenarioDraft":
            return scenario([{"symbol": "R1", "table": "reservations", "role": "the trip", "new": False}])
        return {"rows": [{"template": 0, "overrides": {"flights": []}}]}

    event, history, _ = generate(reply, config=Config(repairs=1))
    assert event.status == "invalid" and event.repairs == 1
    assert "a reservation needs at least one flight" in event.error
    assert len(history) == 3  # the scenario, then the rows twice


def test_each_table_has_its_own_budget_of_candidate_rows():
    seen = []

    def reply(request, model):
        if model.__name__ == "ScenarioDraft":
            return scenario([{"symbol": "F1", "table": "flights", "role": "a flight", "new": False},
                             {"symbol": "U1", "table": "users", "role": "the user", "new": False},
                             {"symbol": "R1", "table": "reservations", "role": "the trip", "new": False}])
        seen.append(request.messages[-1]["content"])
        return {"rows": [{"template": 0}, {"template": 0}, {"template": 0}]}

    event, _, _ = generate(reply, config=Config(candidate_chars=3000))
    text = seen[0]
    for table in ("flights", "users", "reservations"):
        section = text.split(f"\n{table}:\n", 1)[1].split("\n\n", 1)[0]
        shown = re.findall(r"^  \[\d+\] \S+: (\{.*\})$", section, re.M)
        assert shown, table
        for record in shown:
            json.loads(record)  # whole records, never cut
    assert "more not shown" in text  # flights are long: the budget held them back


@pytest.mark.parametrize("env", ["airline", "retail"])
def test_on_the_mock_model_at_most_three_percent_of_events_are_invalid(env, runner, tmp_path):
    invalid = total = 0
    for seed in range(5):
        ws = tmp_path / f"ws{seed}"
        result = runner.invoke(cli, ["run", env, "--events", "30", "--seed", str(seed), "--until", "events",
                                     "--workspace", str(ws)])
        assert result.exit_code == 0, result.output
        with sqlite3.connect(ws / "intellagent.db") as conn:
            statuses = [s for s, in conn.execute("SELECT status FROM run_items WHERE step = 'events'")]
        total += len(statuses)
        invalid += statuses.count("invalid")
    assert total == 150
    assert invalid / total <= 0.03, f"{invalid} of {total} events invalid"



def test_symbols_in_the_scenario_text_become_their_keys_whole_words_only_and_literally():
    from intellagent_plugins.intellagent.generator import _in_text

    text = "USER books for USER_2; USERS and xUSER stay."
    assert _in_text(text, {"USER": r"u\1", "USER_2": "u2"}) == r"u\1 books for u2; USERS and xUSER stay."
