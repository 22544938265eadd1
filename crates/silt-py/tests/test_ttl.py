"""A dataset whose records expire (`ttl`): reads never return an expired
record, and a bad ttl is refused with the reason."""

from __future__ import annotations

import pytest

import siltdb


def test_expired_records_are_not_read(db):
    ds = db.create_dataset(
        "ev", "id", {"id": "int", "t": "int"}, ttl={"time": "t", "after": 100}
    )
    for i, t in enumerate([0, 50, 120, 210]):
        ds.insert({"id": i, "t": t})
    # The written clock is 210: records of time 110 or less have expired.
    assert ds.get(0) is None and ds.get(1) is None
    assert [r["id"] for r in ds.scan()] == [2, 3]
    # An insert over an expired record is not a duplicate.
    ds.insert({"id": 0, "t": 200})
    assert ds.get(0)["t"] == 200


def test_a_bad_ttl_says_what_is_wrong(db):
    with pytest.raises(siltdb.ConfigError, match="give `expiry`"):
        db.create_dataset("a", "id", {"id": "int"}, ttl={"after": 5})
    with pytest.raises(siltdb.ConfigError, match="unknown ttl key `life`"):
        db.create_dataset("b", "id", {"id": "int", "t": "int"}, ttl={"time": "t", "life": 5})
    with pytest.raises(siltdb.ConfigError, match="must be an int"):
        db.create_dataset("c", "id", {"id": "int", "t": "int"}, ttl={"time": "t", "after": "5"})
