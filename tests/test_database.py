"""The event database: schema to SQL, records, transactions, copies, dumps, hashes, diffs."""

from __future__ import annotations

import gc
import json
import re
import sqlite3
import threading
import time

import pytest

from intellagent.environment import Database, RowError, diff_dumps, load_environment, state_hash
from intellagent.environment.database import sqlalchemy_metadata
from tests.conftest import REPO


def test_schema_becomes_real_sql_tables_with_constraints(shop):
    env = load_environment(shop)
    db = env.seed_database()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables - {"_intellagent_versions", "_intellagent_changed"} == {"customers", "orders"}
    with pytest.raises(sqlite3.IntegrityError):  # the enum is a CHECK constraint in SQL itself
        db.execute("UPDATE customers SET tier = 'platinum' WHERE customer_id = 'c1'")
    with pytest.raises(sqlite3.IntegrityError):  # so is the foreign key
        db.execute("INSERT INTO orders VALUES ('o9', 'nobody', '[]', NULL)")
    meta = sqlalchemy_metadata(env.db_schema)
    assert [t.name for t in meta.sorted_tables] == ["customers", "orders"]


def test_dump_round_trip_keeps_types_order_and_absent_keys(shop):
    env = load_environment(shop)
    db = env.seed_database()
    dump = db.dump()
    assert dump["orders"]["o1"]["items"] == [{"sku": "A", "qty": 2.0}]
    assert isinstance(dump["orders"]["o1"]["items"][0]["qty"], float)
    assert "note" not in dump["orders"]["o1"] and dump["orders"]["o2"]["note"] == "gift"
    again = Database.from_dump(env.db_schema, dump)
    assert again.dump() == dump
    assert again.hash() == db.hash() == state_hash(dump)
    assert list(dump["customers"]) == ["c1", "c2"]


def test_hash_is_type_sensitive_and_key_order_free(shop):
    env = load_environment(shop)
    db = env.seed_database()
    before = db.hash()
    record = db.get("orders", "o1")
    record["items"][0]["qty"] = 2  # int instead of float
    db.put("orders", "o1", record)
    assert db.hash() != before
    assert db.hash() == state_hash(db.dump())
    reordered = {t: dict(reversed(list(rows.items()))) for t, rows in db.dump().items()}
    assert state_hash(reordered) == db.hash()


def test_copy_is_independent(shop):
    env = load_environment(shop)
    db = env.seed_database()
    copy = db.copy()
    copy.update("customers", "c1", credit=99)
    assert db.get("customers", "c1")["credit"] == 10
    assert copy.get("customers", "c1")["credit"] == 99
    assert env.seed_database().get("customers", "c1")["credit"] == 10


def test_a_copy_made_inside_an_open_transaction_holds_its_writes_and_outlives_its_rollback(shop):
    """SQLite's online backup cannot read a database its own connection is writing to (the copy
    used to wait forever): a copy is the database as it is now, its own from then on."""
    env = load_environment(shop)
    db = env.seed_database()
    copies: list[Database] = []
    with pytest.raises(RuntimeError, match="undo"):
        with db.transaction():
            db.update("customers", "c1", credit=99)
            worker = threading.Thread(target=lambda: copies.append(db.copy()), daemon=True)
            worker.start()
            worker.join(10)  # on a thread: a copy that waits forever fails the test, not the suite
            raise RuntimeError("undo")
    assert copies, "copy() inside an open transaction did not return"
    copy = copies[0]
    assert db.get("customers", "c1")["credit"] == 10 and copy.get("customers", "c1")["credit"] == 99
    assert list(copy.dump()["customers"]) == list(db.dump()["customers"])  # rows in their order
    assert copy.changed_keys("customers") == [] and copy.hash() == state_hash(copy.dump()) != db.hash()
    copy.update("customers", "c2", credit=7)  # a database of its own: writable, and tracked
    assert copy.changed_keys("customers") == ["c2"] and copy.hash() == state_hash(copy.dump())


def test_rows_are_checked_against_the_schema(shop):
    db = load_environment(shop).seed_database()
    with pytest.raises(RowError, match="column 'credit' expected integer"):
        db.insert("customers", {"customer_id": "c3", "name": "X", "tier": "basic", "credit": "many"})
    with pytest.raises(RowError, match="not one of"):
        db.insert("customers", {"customer_id": "c3", "name": "X", "tier": "vip", "credit": 1})
    with pytest.raises(RowError, match="refers to customers\\['ghost'\\]"):
        db.insert("orders", {"order_id": "o3", "customer_id": "ghost", "items": []})
    with pytest.raises(RowError, match="duplicate primary key"):
        db.insert("customers", {"customer_id": "c1", "name": "X", "tier": "basic", "credit": 1})
    assert db.count("customers") == 2


def test_transaction_rolls_back_on_error(shop):
    db = load_environment(shop).seed_database()
    with pytest.raises(RuntimeError):
        with db.transaction():
            db.update("customers", "c1", credit=500)
            raise RuntimeError("boom")
    assert db.get("customers", "c1")["credit"] == 10


def test_a_database_closed_while_a_tool_call_is_inside_a_transaction_closes_when_it_leaves(shop):
    """A dialog cancelled (its run stopped) closes its database while a tool call still runs in
    its own thread: freeing sqlite3 under a running statement crashed the process (a segfault in
    CI); the connection now closes when the transaction ends, and the tool call finishes."""
    db = load_environment(shop).seed_database()
    inside, closed, seen = threading.Event(), threading.Event(), []

    def tool_call():
        with db.transaction():
            inside.set()
            closed.wait(5)
            db.update("customers", "c1", credit=15)
            seen.append(db.get("customers", "c1")["credit"])

    thread = threading.Thread(target=tool_call)
    thread.start()
    inside.wait(5)
    db.close()
    closed.set()
    thread.join(5)
    assert seen == [15]  # the call went on with its connection
    with pytest.raises(sqlite3.ProgrammingError):
        db.conn.execute("SELECT 1")  # and it was closed as the transaction ended


class SlowClose:
    """sqlite3's connection, its close taking 0.2 s: what it runs meanwhile is noted (on a real
    connection, a statement run while it is freed crashes the process)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.closing, self.closed, self.during_close = conn, threading.Event(), False, []

    def execute(self, sql: str, *args):
        if self.closing.is_set():
            self.during_close.append(sql)
        if self.closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return self.conn.execute(sql, *args)

    def close(self) -> None:
        self.closing.set()
        time.sleep(0.2)
        self.closed = True
        self.closing.clear()
        self.conn.close()

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def test_a_transaction_beginning_as_its_database_closes_waits_and_is_told_it_is_closed(shop):
    """Ctrl-C on a run: its dialogs close their databases while tool calls in other threads are
    beginning theirs. close() looked for an open transaction, then closed outside its lock: a
    transaction that began in between ran its SAVEPOINT on a connection being freed (a segfault
    in 1 of 3 runs of the Ctrl-C test). Now the close and that check are one step: the
    transaction waits for it, then meets sqlite3's error for a closed database."""
    db = load_environment(shop).seed_database()
    conn = db.__dict__["conn"] = SlowClose(db.conn)
    told = []

    def tool_call():
        conn.closing.wait(5)
        try:
            with db.transaction():
                db.get("customers", "c1")
        except sqlite3.ProgrammingError as exc:
            told.append(str(exc))

    thread = threading.Thread(target=tool_call)
    thread.start()
    db.close()
    thread.join(5)
    assert conn.during_close == []
    assert told == ["Cannot operate on a closed database."]

def test_diff_names_changed_fields_added_and_removed_rows(shop):
    db = load_environment(shop).seed_database()
    before = db.dump()
    db.update("customers", "c1", credit=25)
    db.insert("orders", {"order_id": "o3", "customer_id": "c2", "items": [{"sku": "B"}]})
    db.delete("orders", "o2")
    diff = diff_dumps(before, db.dump())
    assert diff.tables["customers"].changed["c1"][0].model_dump() == {
        "path": "credit", "before": 10, "after": 25}
    assert list(diff.tables["orders"].added) == ["o3"]
    assert list(diff.tables["orders"].removed) == ["o2"]
    assert diff_dumps(before, before).empty
    assert diff.summary() == "customers ~1, orders +1 -1"


def test_select_filters_on_columns(shop):
    db = load_environment(shop).seed_database()
    assert [c["customer_id"] for c in db.select("customers", tier="gold")] == ["c1"]
    with pytest.raises(KeyError):
        db.select("customers", colour="red")


def test_database_diff_equals_the_dump_diff(shop):
    from intellagent.environment import diff_databases

    db = load_environment(shop).seed_database()
    before = db.copy()
    db.update("customers", "c1", credit=25)
    record = db.get("orders", "o1")
    record["items"][0]["qty"] = 2  # 2.0 → 2: same value, other type
    db.put("orders", "o1", record)
    db.insert("orders", {"order_id": "o3", "customer_id": "c2", "items": []})
    db.delete("orders", "o2")
    assert diff_databases(before, db) == diff_dumps(before.dump(), db.dump())
    assert diff_databases(before, db).tables["orders"].changed["o1"][0].path == "items"
    assert diff_databases(db, db.copy()).empty


def test_unique_columns_and_lists_in_the_schema():
    import random

    from intellagent.environment import load_environment
    from intellagent.environment.dbschema import DatabaseSchema
    from intellagent.environment.links import copy_as_new, redraw, sync_links
    from pydantic import ValidationError

    env = load_environment(REPO / "environments" / "airline")
    db = env.seed_database()
    user_key, other_key = db.keys("users")[:2]
    user = db.get("users", user_key)
    with pytest.raises(RowError, match="column 'email' must be unique"):
        db.put("users", "someone_new_1", dict(user, reservations=[]))

    rng = random.Random(1)
    assert re.fullmatch(r"[A-Z0-9]{6}", redraw("ZFA04Y", rng, lambda v: False))
    assert redraw("ZFA04Y", rng, lambda v: False)[:3] == "ZFA"  # letters kept when there are digits
    assert redraw("ana@example.com", rng, lambda v: False).endswith("@example.com")
    copy = copy_as_new(db, "users", user_key, "fresh_user_1", rng)
    assert copy["reservations"] == [] and copy["email"] != user["email"]

    # a reservation moved to another user is listed by its new owner only
    reservation = user["reservations"][0]
    record = db.get("reservations", reservation)
    db.put("reservations", reservation, dict(record, user_id=other_key))
    changed = sync_links(db, [("reservations", reservation)])
    assert set(changed) == {("users", user_key), ("users", other_key)}
    assert reservation not in db.get("users", user_key)["reservations"]
    assert db.get("users", other_key)["reservations"][-1] == reservation

    for bad, message in [({"type": "string", "lists": "reservations.user_id"}, "needs type: json"),
                         ({"type": "json", "lists": "reservations.origin"}, "must reference users.user_id")]:
        tables = {"users": {"primary_key": "user_id", "columns": {"user_id": {"type": "string"}, "trips": bad}},
                  "reservations": {"primary_key": "reservation_id", "columns": {
                      "reservation_id": {"type": "string"}, "origin": {"type": "string"},
                      "user_id": {"type": "string", "references": "users.user_id"}}}}
        with pytest.raises(ValidationError, match=message):
            DatabaseSchema.model_validate({"tables": tables})


def test_hashes_and_diffs_skip_only_tables_nobody_wrote(shop):
    """Unchanged tables are skipped by their version tokens; any write, even raw SQL from a
    tool, changes its table's token, so the hash and the diff still see it."""
    from intellagent.environment import diff_databases

    seed = load_environment(shop).seed_database()
    copy = seed.copy()
    assert copy.hash() == seed.hash() == state_hash(seed.dump())
    assert diff_databases(seed, copy).empty
    copy.execute("UPDATE customers SET credit = 11 WHERE customer_id = 'c1'")
    assert copy.hash() == state_hash(copy.dump()) != seed.hash()
    assert diff_databases(seed, copy) == diff_dumps(seed.dump(), copy.dump())
    assert list(diff_databases(seed, copy).tables) == ["customers"]
    again = copy.copy()  # a copy of a copy carries its tokens: equal until one of them writes
    assert diff_databases(copy, again).empty and again.hash() == copy.hash()
    again.execute("DELETE FROM orders WHERE order_id = 'o2'")
    assert again.hash() == state_hash(again.dump())
    assert list(diff_databases(copy, again).tables) == ["orders"]


def test_values_reads_one_column_decoded(shop):
    db = load_environment(shop).seed_database()
    assert db.values("orders", "items") == [r["items"] for r in db.all("orders")]
    with pytest.raises(KeyError):
        db.values("orders", "nope")


def test_incremental_hashes_and_diffs_match_the_dump_under_random_writes(shop):
    """A copy's hash and its diff against its origin read only the rows written since the copy
    (inserts, updates, deletes, a key renamed by raw SQL, a write rolled back), and still equal
    the definitions over the whole dump, through copies of copies, over many seeded write runs."""
    import random

    from intellagent.environment import diff_databases

    env = load_environment(shop)
    rng = random.Random(7)
    incremental = 0
    for run in range(40):
        origin = env.seed_database() if run % 2 else env.seed_database().copy()
        origin.hash()
        db = origin.copy()
        for step in range(rng.randint(1, 6)):
            customers = db.keys("customers")
            choice = rng.randrange(6)
            if choice == 0:
                db.update("customers", rng.choice(customers), credit=rng.randint(0, 9))
            elif choice == 1:
                db.insert("customers", {"customer_id": f"n{run}-{step}", "name": "N", "tier": "basic",
                                        "credit": step})
            elif choice == 2 and db.keys("orders"):
                db.delete("orders", rng.choice(db.keys("orders")))
            elif choice == 3:
                db.insert("orders", {"order_id": f"o{run}-{step}", "customer_id": rng.choice(customers),
                                     "items": [{"sku": "B", "qty": step}]})
            elif choice == 4:
                fresh = [c for c in customers if not db.select("orders", customer_id=c)]
                if fresh:
                    db.execute("UPDATE customers SET customer_id = ? WHERE customer_id = ?",
                               (f"r{run}-{step}", rng.choice(fresh)))
            else:
                with pytest.raises(RowError):
                    with db.transaction():
                        db.update("customers", rng.choice(customers), name="rolled back")
                        db.insert("orders", {"order_id": "bad", "customer_id": "nobody", "items": []})
            if rng.random() < 0.3:
                assert db.hash() == state_hash(db.dump())
        statements: list[str] = []
        db.conn.set_trace_callback(statements.append)
        assert db.hash() == state_hash(db.dump()), run
        reads = [s for s in statements if s.startswith("SELECT") and "_intellagent" not in s
                 and "ORDER BY rowid" not in s]  # the hash's own reads, not dump()'s
        assert all(" IN (" in s for s in reads), reads
        incremental += bool(reads)
        assert diff_databases(origin, db) == diff_dumps(origin.dump(), db.dump()), run
        assert diff_databases(env.seed_database(), db) == diff_dumps(env.seed_database().dump(), db.dump())
        again = db.copy()
        again.update("customers", rng.choice(again.keys("customers")), tier="gold")
        assert again.hash() == state_hash(again.dump())
        assert diff_databases(db, again) == diff_dumps(db.dump(), again.dump())
    assert incremental >= 20  # most runs hashed written tables, and none read a table whole


def test_record_json_is_the_records_json_and_follows_writes(shop):
    db = load_environment(shop).seed_database()
    for table in ("customers", "orders"):
        for key in db.keys(table):
            assert db.record_json(table, key) == json.dumps(db.get(table, key), default=str, ensure_ascii=False)
    before = db.record_json("orders", "o1")
    db.update("orders", "o1", note="ünïcode")
    assert db.record_json("orders", "o1") != before and "ünïcode" in db.record_json("orders", "o1")
    assert db.record_json("orders", "nope") is None


def test_record_json_without_keeping_reads_a_kept_text_and_keeps_no_new_one(shop):
    db = load_environment(shop).seed_database()
    kept = db.record_json("orders", "o1")  # (kept)
    db.update("orders", "o2", note="only this event's")
    size = len(db._row_json_text)
    assert db.record_json("orders", "o1", keep=False) is kept  # the kept text itself
    text = db.record_json("orders", "o2", keep=False)
    assert text == json.dumps(db.get("orders", "o2"), default=str, ensure_ascii=False)
    assert len(db._row_json_text) == size  # the written row's text was not kept
    assert db.record_json("orders", "o2") == text and len(db._row_json_text) == size + 1


@pytest.mark.parametrize("bound", [(1, 10**9), (64, 1)])
def test_hashes_stay_right_when_the_cache_of_table_texts_is_full(shop, monkeypatch, bound):
    from intellagent.environment import database

    monkeypatch.setattr(database, "HASH_TEXTS", bound)
    env = load_environment(shop)
    for i in range(5):
        db = env.seed_database()
        db.update("customers", "c1", credit=i)
        again = db.copy()
        again.delete("orders", "o2")
        assert db.hash() == state_hash(db.dump()) and again.hash() == state_hash(again.dump())
        assert len(db.schema._table_hash_text) <= bound[0]


def test_the_row_caches_keep_only_recent_rows_and_hashes_stay_right(shop, monkeypatch):
    """Events and conversations write new rows that are read again soon or never: the schema's
    caches of row texts stay under their bound in a long run (a bound of 50,000 airline rows
    was about 170 MB) and what is read past it is decoded again, the same."""
    from intellagent.environment import database

    monkeypatch.setattr(database, "ROWS_KEPT", 8)
    env = load_environment(shop)
    schema = env.db_schema
    for i in range(30):
        db = env.seed_database()
        db.insert("customers", {"customer_id": f"n{i}", "name": f"N{i}", "tier": "basic", "credit": i})
        db.update("orders", "o1", note=f"note {i}")
        assert db.hash() == state_hash(db.dump()), i
        for table in ("customers", "orders"):
            for key in db.keys(table):
                assert db.record_json(table, key) == json.dumps(db.get(table, key), default=str,
                                                                ensure_ascii=False)
        assert len(schema._row_hash_text) <= 8 and len(schema._row_json_text) <= 8


def test_schemas_with_the_same_tables_and_other_keys_get_their_own_triggers(tmp_path):
    from intellagent.environment.dbschema import DatabaseSchema

    def schema(key: str) -> DatabaseSchema:
        return DatabaseSchema.model_validate({"tables": {"people": {"primary_key": key, "columns": {
            "pid": {"type": "string"}, "uid": {"type": "string"}, "name": {"type": "string"}}}}})

    for key in ("pid", "uid"):
        first = {"pid": "p-a", "uid": "u-a", "name": "A"}
        db = Database.from_dump(schema(key), {"people": {first[key]: first}})
        db.hash()
        copy = db.copy()
        copy.insert("people", {"pid": "p-b", "uid": "u-b", "name": "B"})
        assert copy.changed_keys("people") == [{"pid": "p-b", "uid": "u-b"}[key]]
        copy.delete("people", first[key])
        assert copy.hash() == state_hash(copy.dump())


def test_a_row_that_replace_deletes_is_a_changed_key(shop):
    """INSERT OR REPLACE clashing on another row's UNIQUE value deletes that row; the hash and
    the diff must see it go."""
    from intellagent.environment import diff_databases
    from intellagent.environment.dbschema import DatabaseSchema

    schema = DatabaseSchema.model_validate({"tables": {"users": {"primary_key": "id", "columns": {
        "id": {"type": "string"}, "email": {"type": "string", "unique": True}}}}})
    seed = Database.from_dump(schema, {"users": {"u1": {"id": "u1", "email": "a@x"},
                                                 "u2": {"id": "u2", "email": "b@x"}}})
    seed.hash()
    db = seed.copy()
    db.execute("INSERT OR REPLACE INTO users VALUES ('u3', 'a@x')")  # u1 goes
    assert sorted(db.changed_keys("users")) == ["u1", "u3"]
    assert db.hash() == state_hash(db.dump())
    assert diff_databases(seed, db) == diff_dumps(seed.dump(), db.dump())
    assert list(diff_databases(seed, db).tables["users"].removed) == ["u1"]


def test_a_json_primary_key_is_matched_as_rows_are_keyed():
    from intellagent.environment.dbschema import DatabaseSchema

    schema = DatabaseSchema.model_validate({"tables": {"t": {"primary_key": "k", "columns": {
        "k": {"type": "json"}, "v": {"type": "string"}}}}})
    db = Database.from_dump(schema, {"t": {k: {"k": k, "v": "x"} for k in ("a", "b")}})
    db.hash()
    copy = db.copy()
    copy.delete("t", json.dumps("a"))  # the raw SQL value of a JSON key
    assert copy.changed_keys("t") == ['"a"'] and copy.hash() == state_hash(copy.dump())


def test_a_copy_with_more_changed_keys_than_listed_is_read_whole(shop, monkeypatch):
    from intellagent.environment import database, diff_databases

    monkeypatch.setattr(database, "LISTED_KEYS", 1)
    seed = load_environment(shop).seed_database()
    seed.hash()
    db = seed.copy()
    db.update("customers", "c1", credit=3)
    assert db.changed_keys("customers") == ["c1"]
    db.insert("customers", {"customer_id": "c9", "name": "N", "tier": "basic", "credit": 1})
    assert db.changed_keys("customers") is None
    assert db.hash() == state_hash(db.dump())
    assert diff_databases(seed, db) == diff_dumps(seed.dump(), db.dump())


def test_a_database_dropped_without_close_frees_its_connection_at_once(shop):
    # sqlite3 holds a connection in a reference cycle: without the garbage collector, one
    # dropped open would keep its whole in-memory database until a full collection
    env = load_environment(shop)
    gc.disable()
    try:
        db = env.seed_database()
        conn = db.conn
        copy = db.copy()
        copied = copy.conn
        del db, copy
        for dropped in (conn, copied):
            with pytest.raises(sqlite3.ProgrammingError, match="closed"):
                dropped.execute("SELECT 1")
    finally:
        gc.enable()
    kept = env.seed_database()
    assert kept.get("customers", "c1")["credit"] == 10  # the seed it was copied from is untouched


def test_a_database_made_again_with_the_tokens_of_the_first_diffs_as_a_copy_of_it(shop):
    from intellagent.environment import diff_databases
    from intellagent.environment.loader import Row

    env = load_environment(shop)
    rows = [Row(table="customers", key="c9", record={"customer_id": "c9", "name": "Eve", "tier": "gold", "credit": 3})]
    db = env.database_with(rows)
    start = db.versions()
    db.update("customers", "c1", credit=25)
    db.delete("orders", "o2")
    again = env.database_with(rows)
    again.take_versions(start)
    assert again.base_versions() == start and all(again.changed_keys(t) == [] for t in env.db_schema.tables)
    assert diff_databases(again, db) == diff_dumps(again.dump(), db.dump())
    assert set(diff_databases(again, db).tables) == {"customers", "orders"}
    untouched = env.database_with(rows)
    untouched.take_versions(start)
    assert diff_databases(untouched, env.database_with(rows)).empty
    assert again.hash() == state_hash(again.dump())


OPEN_DATABASES: list[int] = []


def counting_agent(messages, tools):
    """The shop's agent, noting how many event databases are open while it works."""
    from tests.test_mutants import shop_agent

    gc.collect()
    OPEN_DATABASES.append(sum(1 for o in gc.get_objects() if isinstance(o, Database) and _is_open(o)))
    return shop_agent(messages, tools)


def _is_open(db: Database) -> bool:
    try:
        db.conn.execute("SELECT 1")
        return True
    except sqlite3.ProgrammingError:
        return False


def test_a_dialog_in_progress_holds_one_database(runner, shop, tmp_path):
    # its database as it found it is made again for the diff at the end, not held: with a
    # copy per dialog in flight, a run held two event databases per dialog
    from intellagent.cli import cli
    from tests import test_database as agent_module  # (the module the run imports the agent from)
    from tests.test_mutants import PIPELINE, briefs_plugin

    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE.replace("tests.test_mutants:shop_agent", "tests.test_database:counting_agent"))
    counts = agent_module.OPEN_DATABASES
    counts.clear()
    result = runner.invoke(cli, ["run", str(shop), "--pipeline", str(pipeline), "--workspace", str(tmp_path / "ws")],
                           obj={"plugins": (briefs_plugin(),)})
    assert result.exit_code in (0, 1), result.output
    assert len(counts) >= 2, result.output  # the agent's turns (after the lookup, after the write)
    assert max(counts) == 1, counts  # the dialog's own (a copy of it beside it before)
    from intellagent_plugins.reporters.writers import read_report

    report = read_report(next((tmp_path / "ws" / "runs").glob("*/report.json")))
    [dialog] = [i["value"] for i in report["items"] if i["step"] == "dialogs"]
    assert dialog["db_diff"]["tables"]["customers"]["changed"]["c1"][0]["after"] == 15  # 10 + 5


GENERATOR_CALLS: list[tuple[str, int]] = []


def counting_model(request, response_model):
    """A schema-fabricating model noting, at each call, how many databases are open."""
    import random

    from intellagent.llm.fabricate import fabricate

    gc.collect()
    name = getattr(response_model, "__name__", "chat")
    GENERATOR_CALLS.append((name, sum(1 for o in gc.get_objects() if isinstance(o, Database) and _is_open(o))))
    if response_model is None:
        return "Alright."
    return fabricate(response_model.model_json_schema(), random.Random(request.key()))


def test_an_event_holds_no_database_while_it_waits_for_the_model(runner, tmp_path):
    # it reads the seed itself for the examples and candidate rows, and puts the answer's rows
    # in the one scratch copy of the thread, undone after: a copy held through its two calls was
    # one database per event in flight
    from intellagent.cli import cli
    from tests import test_database as model_module

    calls = model_module.GENERATOR_CALLS
    calls.clear()
    result = runner.invoke(cli, ["run", "airline", "--events", "6", "--until", "events", "--workspace",
                                 str(tmp_path / "ws"), "--model", "mock/function", "--set", "llm.roles={}",
                                 "--set", "llm.default.options.function=tests.test_database:counting_model"])
    assert result.exit_code == 0, result.output
    first = calls[0][1]  # before any event: the seed's own
    generating = [n for name, n in calls if name in ("ScenarioDraft", "RowsDraft")]
    assert len(generating) >= 10, calls
    assert max(generating) <= first + 1, calls  # the scratch copy, whatever the events in flight


def test_the_frozen_seed_refuses_writes_and_gives_each_caller_its_own_list_of_keys(shop):
    env = load_environment(shop)
    seed = env.seed_view()
    keys = seed.keys("customers")
    assert keys == [r[0] for r in seed.execute("SELECT customer_id FROM customers ORDER BY rowid")]
    assert seed.keys("customers", limit=1) == keys[:1]
    keys.append("not-a-key")  # a caller's list is its own: the next caller's is as it was
    assert "not-a-key" not in seed.keys("customers")
    with pytest.raises(sqlite3.OperationalError):  # query_only
        seed.execute("DELETE FROM orders")
    copy = env.seed_database()  # a copy is writable and reads its own keys
    copy.delete("orders", copy.keys("orders")[0])
    assert len(copy.keys("orders")) == len(seed.keys("orders")) - 1
    assert copy.get("customers", "no-such-key") is None and not copy.has("customers", "no-such-key")
    assert copy.get("customers", keys[0]) == seed.get("customers", keys[0])


def test_an_undone_block_leaves_the_database_as_it_was_however_it_ends(shop):
    env = load_environment(shop)
    db = env.seed_database()
    before = (db.dump(), db.versions(), db.changed_keys("customers"), db.hash())
    with db.undone():
        db.put("customers", "c3", {"name": "Cy", "tier": "basic", "credit": 1})
        with db.transaction():  # a transaction inside commits into the block, and is undone with it
            db.update("customers", "c1", credit=99)
        db.delete("orders", "o2")
        assert db.get("customers", "c1")["credit"] == 99 and db.changed_keys("customers") == ["c1", "c3"]
        db.take_versions({"customers": 0, "orders": 0})  # (a diff names its own base)
    assert (db.dump(), db.versions(), db.changed_keys("customers"), db.hash()) == before
    assert db.base_versions() == before[1]
    with pytest.raises(RowError), db.undone():
        db.put("orders", "o3", {"customer_id": "c1", "items": []})
        db.put("orders", "o4", {"customer_id": "nobody", "items": []})
    assert (db.dump(), db.versions(), db.changed_keys("customers"), db.hash()) == before
    # a row added after the block takes the place (rowid) a fresh copy gives it
    db.insert("customers", {"customer_id": "c9", "name": "Di", "tier": "gold", "credit": 0})
    fresh = env.seed_database()
    fresh.insert("customers", {"customer_id": "c9", "name": "Di", "tier": "gold", "credit": 0})
    assert db.execute("SELECT rowid, customer_id FROM customers") == \
        fresh.execute("SELECT rowid, customer_id FROM customers")


def test_a_lent_copy_is_lent_again_with_its_writes_undone_unless_it_was_closed_or_kept_a_write(shop, monkeypatch):
    from intellagent.environment import Row, loader

    env = load_environment(shop)
    seed = env.seed_view().dump()
    rows = [Row(table="orders", key="o9", record={"customer_id": "c2", "items": [{"sku": "B"}]})]
    with env.lent_database(rows) as first:
        assert first.dump() == env.database_with(rows).dump()  # as a fresh copy with the rows
        first.update("customers", "c1", credit=50)
        with env.lent_database() as inner:  # lent while the first is: a copy of its own
            assert inner is not first and inner.dump() == seed
            inner.update("customers", "c2", credit=7)
        assert first.get("customers", "c2")["credit"] == 0
    with env.lent_database() as again, env.lent_database() as other:
        assert {again, other} == {first, inner}  # the same two copies, their writes undone
        assert again.dump() == other.dump() == seed and again.versions() == env.seed_view().versions()
        again.close()  # a tool call may still use it: closed as its block ends, never lent again
    assert not _is_open(again) and _is_open(other)
    with env.lent_database() as db:
        assert db is other
        db.execute("DELETE FROM orders WHERE order_id = 'o1'")
        db.execute("COMMIT")  # the write outlives the undoing (the block's savepoint ends with it)
    assert not _is_open(other)  # not the seed any more: closed, not lent again
    with env.lent_database() as db:
        assert db not in (first, inner) and db.dump() == seed
    assert env.seed_view().dump() == seed
    # idle copies are kept up to POOL_BYTES, and at least one
    monkeypatch.setattr(loader, "POOL_BYTES", 1)
    with env.lent_database() as a, env.lent_database() as b:
        pass
    with env.lent_database() as c, env.lent_database() as d:
        assert (c in (a, b)) + (d in (a, b)) == 1  # one kept idle, the other closed
    assert sum(map(_is_open, {a, b, c, d})) == 1
    # a copy serves LEND_TIMES blocks, then it is closed and another made
    monkeypatch.setattr(loader, "LEND_TIMES", 2)
    env = load_environment(shop)  # (no copy idle yet)
    with env.lent_database() as e:
        pass
    with env.lent_database() as f:
        pass
    with env.lent_database() as g:
        assert g is not f and g.dump() == seed
    assert f is e and not _is_open(f)


def test_a_run_on_lent_copies_makes_what_it_makes_on_fresh_ones(runner, tmp_path, monkeypatch):
    # the events, dialogs and verdicts take copies lent before, with the writes of other items'
    # blocks undone; the same run with a fresh copy for each block (each copy closed, never lent
    # again) must give the same values, byte for byte
    from intellagent.cli import cli
    from intellagent.environment import loader

    def run(name: str) -> bytes:
        workspace = tmp_path / name
        result = runner.invoke(cli, ["run", "airline", "--events", "12", "--model", "mock/demo",
                                     "--workspace", str(workspace)])
        assert result.exit_code in (0, 1), result.output
        return next((workspace / "runs").glob("*/values.jsonl")).read_bytes()

    lent = run("lent")
    monkeypatch.setattr(loader.Environment, "_give_back", lambda self, db, lent: db.close())
    assert run("fresh") == lent


def test_a_dialogs_copy_goes_back_to_be_lent_again_unless_a_tool_call_may_still_write_to_it(shop):
    import asyncio
    from types import SimpleNamespace

    from intellagent.offload import Offload
    from intellagent_plugins.dialogue.scenario import Scenario
    from intellagent_plugins.dialogue.simulator import Conversation
    from tests.test_mcp_a2a_agents import MORE_IMPL, MORE_TOOLS

    (shop / "tools.yaml").write_text((shop / "tools.yaml").read_text() + MORE_TOOLS.replace("timeout: 0.3", "timeout: 30"))
    (shop / "impl.py").write_text((shop / "impl.py").read_text() + MORE_IMPL)
    env = load_environment(shop)
    offload = Offload(2)
    ctx = SimpleNamespace(env=env, offload=offload, observe=None, lent_database=env.lent_database,
                          agent=lambda ground_truth=None: SimpleNamespace())

    async def dialog(cancelled: bool) -> Conversation:
        talk = Conversation(ctx, Scenario(id="s", brief="b"), max_tool_steps=3)
        await talk.toolbox.acall("add_credit", {"customer_id": "c1", "amount": 2}, "1")
        if cancelled:  # the run stops while a tool call runs in its thread
            call = asyncio.ensure_future(talk.toolbox.acall("slow_lookup", {}, "2"))
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        talk.close()
        return talk

    try:
        ended = asyncio.run(dialog(cancelled=False))
        assert not ended.toolbox.abandoned
        [(kept, _)] = env._pool  # given back, its write undone
        assert kept is ended.toolbox.db and kept.get("customers", "c1")["credit"] == 10
        cut = asyncio.run(dialog(cancelled=True))
        assert cut.toolbox.abandoned and cut.toolbox.db is kept
        assert env._pool == [] and kept.closing  # closed when the call's transaction ends, never lent again
    finally:
        offload.close()
