"""The event database: schema to SQL, records, transactions, copies, dumps, hashes, diffs."""

from __future__ import annotations

import sqlite3

import pytest

from intellagent.environment import Database, RowError, diff_dumps, load_environment, state_hash
from intellagent.environment.database import sqlalchemy_metadata


def test_schema_becomes_real_sql_tables_with_constraints(shop):
    env = load_environment(shop)
    db = env.seed_database()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"customers", "orders"}
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
