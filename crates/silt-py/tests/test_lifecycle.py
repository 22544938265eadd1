"""Opening, closing, persistence across reopen, batches, DDL and statistics."""

from __future__ import annotations

import pytest

import siltdb


def test_context_manager_closes_and_releases_the_lock(db_path):
    with siltdb.connect(db_path) as db:
        assert not db.closed
        db.create_dataset("d", primary_key="id").insert({"id": 1, "v": "x"})
    assert db.closed
    with pytest.raises(siltdb.ClosedError):
        db.datasets()
    # The directory lock was released: the same process can open it again.
    with siltdb.connect(db_path) as db2:
        assert db2["d"].get(1) == {"id": 1, "v": "x"}


def test_context_manager_closes_on_exception(db_path):
    with pytest.raises(RuntimeError):
        with siltdb.connect(db_path) as db:
            db.create_dataset("d", primary_key="id").insert({"id": 1})
            raise RuntimeError("boom")
    assert db.closed
    with siltdb.connect(db_path) as db:
        assert db["d"].get(1) == {"id": 1}


@pytest.mark.parametrize("durability", ["sync", "batched", "batched(5)", "none"])
def test_persistence_across_reopen(db_path, durability):
    with siltdb.connect(db_path, durability=durability) as db:
        ds = db.create_dataset(
            "p", primary_key="id", fields={"loc": "point"}, partitions=2, merge_policy="tiered(4)"
        )
        db.create_index("p", "by_loc", "rtree", "loc")
        db.create_index("p", "by_n", "btree", "n")
        ds.insert_many({"id": i, "n": i % 10, "loc": [i / 100, i / 200]} for i in range(500))
        db.flush()
        ds.insert_many({"id": i, "n": i % 10, "loc": [i / 100, i / 200]} for i in range(500, 600))
        assert ds.delete(3)
    with siltdb.connect(db_path) as db:
        assert db.datasets() == ["p"]
        ds = db["p"]
        assert {i["name"] for i in ds.indexes()} == {"by_loc", "by_n"}
        assert ds.get(3) is None
        assert ds.get(599)["n"] == 9
        assert len(list(ds.scan())) == 599
        assert len(list(ds.range("by_n", 4, 4))) == 60
        assert [h["pk"] for h in ds.nearest("by_loc", 0, 0, 2)] == [0, 1]
        assert ds.definition()["partitions"] == 2


def run_child(code: str) -> None:
    import subprocess
    import sys
    import textwrap

    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=120)


def test_crash_recovery_replays_the_log(db_path):
    # The child process dies without closing: acknowledged (fsynced) commits
    # must come back from the log.
    run_child(
        f"""
        import os, siltdb
        db = siltdb.connect({str(db_path)!r}, durability="sync", checkpoint_interval=0)
        ds = db.create_dataset("r", primary_key="id")
        for i in range(50):
            ds.insert({{"id": i, "v": "x" * i}})
        os._exit(0)
        """
    )
    with siltdb.connect(db_path) as db:
        assert [r["id"] for r in db["r"].scan()] == list(range(50))
        assert db["r"].get(49)["v"] == "x" * 49
        rec = db.recovery()
        assert rec["records_redone"] >= 50
        assert set(rec) >= {"from_lsn", "end_lsn", "committed_txns"}


def test_open_databases_are_closed_at_exit(db_path):
    # durability="none" never fsyncs the log; the exit hook closes (flushes).
    run_child(
        f"""
        import siltdb
        db = siltdb.connect({str(db_path)!r}, durability="none")
        db.create_dataset("e", primary_key="id").insert_many({{"id": i}} for i in range(100))
        """
    )
    with siltdb.connect(db_path) as db:
        assert len(list(db["e"])) == 100
        assert db.recovery()["records_redone"] == 0


def test_batches(db):
    ds = db.create_dataset("b", primary_key="id")
    r = ds.insert_many([{"id": i} for i in range(10)])
    assert (r.committed, r.failed, r.not_attempted) == (10, [], 0)
    assert "committed=10" in repr(r)

    # Non-atomic, stop at the first error: records before it stay.
    with pytest.raises(siltdb.DuplicateKeyError) as e:
        ds.insert_many([{"id": 100}, {"id": 5}, {"id": 101}])
    assert e.value.index == 1
    assert e.value.report.committed == 1
    assert e.value.report.not_attempted == 1
    assert ds.get(100) is not None and ds.get(101) is None

    # Non-atomic, go on after errors, report instead of raising.
    r = ds.insert_many(
        [{"id": 200}, {"id": 5}, {"nokey": 1}, {"id": 201}, "not a dict", {"id": 202}],
        stop_on_error=False,
        raise_errors=False,
    )
    assert r.committed == 3
    assert [i for i, _ in r.failed] == [1, 2, 4]
    assert isinstance(r.failed[0][1], siltdb.DuplicateKeyError)
    assert isinstance(r.failed[1][1], siltdb.InvalidInputError)
    assert isinstance(r.failed[2][1], siltdb.InvalidInputError)

    # Atomic: all or nothing.
    with pytest.raises(siltdb.DuplicateKeyError) as e:
        ds.insert_many([{"id": 300}, {"id": 301}, {"id": 5}], atomic=True)
    assert e.value.report.committed == 0
    assert ds.get(300) is None and ds.get(301) is None
    with pytest.raises(siltdb.InvalidInputError):
        ds.insert_many([{"id": 300}, {"id": 2**64}], atomic=True)
    assert ds.get(300) is None
    r = ds.insert_many(({"id": i} for i in range(300, 310)), atomic=True)
    assert r.committed == 10

    # Upserts and large batches (several chunks).
    r = ds.upsert_many({"id": i, "v": i} for i in range(10_000))
    assert r.committed == 10_000
    assert ds.get(9_999) == {"id": 9_999, "v": 9_999}
    assert len(list(ds)) == 10_000  # ids 100..309 were among them


def test_ddl_and_stats(db):
    ds = db.create_dataset("s", primary_key="id", fields={"t": "string"})
    ds.insert_many({"id": i, "t": f"word{i % 7} other"} for i in range(300))
    info = db.create_index("s", "words", "keyword", "t", reconcile="antimatter")
    assert info["kind"] == "keyword" and info["fields"] == ["t"]
    assert len(list(ds.text("words", "word3"))) == 43
    db.create_index("s", "grams", "ngram", "t", gram=2)
    assert len(list(ds.text("grams", "d3 o"))) == 43
    stats = db.stats()
    assert stats["durability"] == "none"
    assert stats["datasets"][0]["name"] == "s"
    assert ds.stats()["name"] == "s"
    ds.compact()
    cp = db.checkpoint()
    assert "low_water_lsn" in cp
    db.wait_idle()
    db.drop_index("s", "words")
    assert [i["name"] for i in ds.indexes()] == ["grams"]
    with pytest.raises(siltdb.NotFoundError):
        list(ds.text("words", "word3"))
    db.drop_dataset("s")
    assert db.datasets() == []
    assert "siltdb.Database" in repr(db) and "siltdb.Dataset" in repr(ds)


def test_version():
    assert isinstance(siltdb.__version__, str) and siltdb.__version__


def test_remote_tier_in_memory_object_store(db_path, tmp_path):
    # memory:// is an in-process bucket: the components leave the directory.
    url = f"memory://{tmp_path.name}"
    with siltdb.connect(db_path) as db:
        ds = db.create_dataset("r", primary_key="id", remote=url, remote_level=0)
        ds.insert_many({"id": i, "v": "x" * 50} for i in range(2000))
        ds.flush()
    assert list(db_path.rglob("*.sc")) == []
    with siltdb.connect(db_path) as db:
        assert db["r"].get(1999) == {"id": 1999, "v": "x" * 50}
        assert len(list(db["r"].scan())) == 2000


def test_remote_tier_rejects_a_bad_url(db_path):
    with siltdb.connect(db_path) as db:
        with pytest.raises(siltdb.ConfigError, match="object storage URL"):
            db.create_dataset("r", primary_key="id", remote="not a url")
        with pytest.raises(siltdb.ConfigError, match="no object store for `ftp://`"):
            db.create_dataset("r", primary_key="id", remote="ftp://host/x")
