"""Foreign keys from Python: declared with the dataset or added later,
kept by every write (single, batch, transaction, SQL), refusals as
ForeignKeyError naming the key, deletes that cascade."""

from __future__ import annotations

import pytest

import siltdb


@pytest.fixture
def shop(db):
    db.create_dataset("customer", "c_id", {"c_id": "int", "name": "string"})
    db.create_dataset(
        "orders",
        "o_id",
        {"o_id": "int", "o_c_id": "int"},
        references=[{"fields": "o_c_id", "parent": "customer"}],
    )
    db.create_dataset(
        "order_line",
        "ol_id",
        {"ol_id": "int", "ol_o_id": "int"},
        references=[
            {"fields": ["ol_o_id"], "parent": "orders", "on_delete": "cascade", "name": "ol_o"}
        ],
    )
    return db


def test_writes_keep_the_keys(shop):
    customer, orders, lines = shop["customer"], shop["orders"], shop["order_line"]
    with pytest.raises(siltdb.ForeignKeyError) as e:
        orders.insert({"o_id": 1, "o_c_id": 7})
    assert e.value.dataset == "orders"
    assert e.value.constraint == "orders_o_c_id_fkey"
    assert e.value.other == "customer"
    assert "is not present in dataset `customer`" in str(e.value)
    assert orders.get(1) is None
    customer.insert({"c_id": 7, "name": "ann"})
    orders.insert({"o_id": 1, "o_c_id": 7})
    lines.insert({"ol_id": 10, "ol_o_id": 1})
    with pytest.raises(siltdb.ForeignKeyError) as e:
        customer.delete(7)
    assert e.value.other == "orders"
    orders.delete(1)
    assert lines.get(10) is None, "the line cascaded with its order"
    with shop.transaction() as tx:
        tx.insert(lines, {"ol_id": 11, "ol_o_id": 2})
        tx.insert(orders, {"o_id": 2, "o_c_id": 7})
    assert lines.get(11) is not None


def test_add_and_drop_a_key(shop):
    notes = shop.create_dataset("notes", "id", {"id": "int", "cust": "int"})
    notes.insert({"id": 1, "cust": 3})
    with pytest.raises(siltdb.ForeignKeyError):
        shop.add_foreign_key("notes", "cust", "customer", on_delete="cascade")
    shop["customer"].insert({"c_id": 3, "name": "c"})
    shop.add_foreign_key("notes", "cust", "customer", on_delete="cascade")
    with pytest.raises(siltdb.ForeignKeyError):
        notes.insert({"id": 2, "cust": 4})
    with pytest.raises(siltdb.ConfigError, match="on_delete"):
        shop.add_foreign_key("notes", "cust", "customer", on_delete="set null")
    shop.drop_foreign_key("notes", "notes_cust_fkey")
    notes.insert({"id": 2, "cust": 4})
    with pytest.raises(siltdb.ConfigError, match="references"):
        shop.drop_dataset("customer")
