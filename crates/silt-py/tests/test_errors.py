"""Errors are typed (one class per kind of failure, all under siltdb.Error),
carry useful attributes and say what to do."""

from __future__ import annotations

import pytest

import siltdb


def test_hierarchy():
    for cls in (
        siltdb.InvalidInputError,
        siltdb.TooLargeError,
        siltdb.ConfigError,
        siltdb.DuplicateKeyError,
        siltdb.NotFoundError,
        siltdb.AlreadyExistsError,
        siltdb.CorruptionError,
        siltdb.StorageIOError,
        siltdb.LockedError,
        siltdb.ClosedError,
        siltdb.InternalError,
    ):
        assert issubclass(cls, siltdb.Error)
    assert issubclass(siltdb.InvalidInputError, ValueError)
    assert issubclass(siltdb.ConfigError, ValueError)
    assert issubclass(siltdb.NotFoundError, LookupError)
    assert issubclass(siltdb.StorageIOError, OSError)
    assert siltdb.Error.__module__ == "siltdb"


def test_duplicate_key(db):
    ds = db.create_dataset("d", primary_key="id")
    ds.insert({"id": "a"})
    with pytest.raises(siltdb.DuplicateKeyError) as e:
        ds.insert({"id": "a", "x": 1})
    assert e.value.dataset == "d"
    assert "a" in e.value.key
    assert ds.get("a") == {"id": "a"}
    ds.upsert({"id": "a", "x": 2})
    assert ds.get("a") == {"id": "a", "x": 2}


def test_not_found_and_already_exists(db):
    with pytest.raises(siltdb.NotFoundError) as e:
        db.dataset("missing")
    assert e.value.dataset == "missing"
    with pytest.raises(LookupError):
        db["missing"]
    db.create_dataset("d", primary_key="id")
    with pytest.raises(siltdb.AlreadyExistsError) as e:
        db.create_dataset("d", primary_key="id")
    assert e.value.dataset == "d"
    db.create_index("d", "i", "btree", "x")
    with pytest.raises(siltdb.AlreadyExistsError) as e:
        db.create_index("d", "i", "btree", "y")
    assert e.value.index == "i"
    with pytest.raises(siltdb.NotFoundError) as e:
        db.drop_index("d", "nope")
    assert e.value.index == "nope"
    with pytest.raises(siltdb.NotFoundError):
        db.create_index("nope", "i", "btree", "x")


def test_dropped_dataset_handle(db):
    ds = db.create_dataset("d", primary_key="id")
    ds.insert({"id": 1})
    db.drop_dataset("d")
    with pytest.raises(siltdb.NotFoundError):
        ds.get(1)
    assert db.datasets() == []


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"primary_key": []}, "primary key"),
        ({"primary_key": "id", "fields": {"x": "colour"}}, "unknown type"),
        ({"primary_key": "id", "fields": {"id": "point"}}, "cannot be a key"),
        ({"primary_key": "id", "partitions": 0}, "partitions"),
        ({"primary_key": "id", "memory_budget": 1000}, "memory budget"),
        ({"primary_key": "id", "memory_budget": "lots"}, "memory_budget"),
        ({"primary_key": "id", "merge_policy": "sometimes"}, "merge policy"),
        ({"primary_key": "id", "compression": "zip"}, "zip"),
        ({"primary_key": 5}, "primary_key"),
    ],
)
def test_bad_dataset_config(db, kwargs, match):
    with pytest.raises(siltdb.Error, match=match) as e:
        db.create_dataset("d", **kwargs)
    assert isinstance(e.value, (siltdb.ConfigError, siltdb.InvalidInputError))
    assert db.datasets() == []


def test_bad_names(db):
    with pytest.raises(siltdb.ConfigError, match="invalid dataset name"):
        db.create_dataset("../etc", primary_key="id")
    db.create_dataset("ok", primary_key="id")
    with pytest.raises(siltdb.ConfigError, match="reserved"):
        db.create_index("ok", "primary", "btree", "x")


def test_sizes_accept_strings(db):
    ds = db.create_dataset("d", primary_key="id", memory_budget="8MB", block_size="8KiB")
    assert ds.definition()["memory_budget"] == 8 << 20
    assert ds.definition()["block_size"] == 8 << 10


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        (("btree", "x"), {"gram": 3}, "gram"),
        (("colour", "x"), {}, "unknown index type"),
        (("rtree", "x"), {}, "no declared type"),
        (("rtree", "n"), {}, "declared int"),
        (("keyword", "n"), {}, "text field"),
        (("btree", "loc"), {}, "cannot order geometries"),
        (("rtree", ["loc", "loc2"]), {}, "exactly one field"),
        (("rtree", "loc"), {"reconcile": "sometimes"}, "reconciliation"),
        (("ngram", "t"), {"gram": 0}, "between 1 and 32"),
        (("rtree", "loc"), {"space": (1, 1, 0, 0)}, "space"),
        (("embedded", "t"), {"bits_per_key": 0.5}, "bits_per_key"),
        (("keyword", "t"), {"merge_policy": "leveled"}, "leveled"),
        (("valuelist", "n"), {}, "needs a `time` option"),
        (("btree", "n"), {"time": "t"}, "valuelist indexes only"),
        (("valuelist", "n"), {"time": "t", "clock": "sundial"}, "unknown clock"),
        (("brin", "n"), {"chunk_bytes": 100}, "between 4 KiB and 1 GiB"),
        (("brin", "n"), {"brin_form": "key_value"}, "chunk_size"),
        (("brin", "n"), {"chunk_bytes": 8192, "brin_form": "bitmap"}, "unknown brin_form"),
        (("btree", "n"), {"chunk_bytes": 8192}, "brin indexes only"),
    ],
)
def test_bad_index_config(db, args, kwargs, match):
    db.create_dataset("d", primary_key="id", fields={"loc": "point", "n": "int", "t": "string"})
    with pytest.raises(siltdb.ConfigError, match=match):
        db.create_index("d", "i", *args, **kwargs)
    assert db["d"].indexes() == []


def test_index_refuses_bad_records(db):
    ds = db.create_dataset("d", primary_key="id")
    db.create_index("d", "by_x", "btree", "x")
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 1, "x": [1, 2]})
    assert e.value.field == "x"
    assert ds.get(1) is None


def test_valuelist_index_takes_its_time_and_refuses_bad_times(db):
    ds = db.create_dataset("d", primary_key="id")
    d = db.create_index("d", "l", "valuelist", "topic", time="t", expiry="until")
    assert d["kind"] == "valuelist" and d["options"]["time"] == "t"
    ds.insert({"id": 1, "topic": "news", "t": 5, "until": 9})
    with pytest.raises(siltdb.InvalidInputError, match="as an integer") as e:
        ds.insert({"id": 2, "topic": "news", "t": "noon"})
    assert e.value.field == "t"
    assert ds.get(2) is None


def test_bad_connect_options(tmp_path):
    with pytest.raises(siltdb.ConfigError, match="durability"):
        siltdb.connect(tmp_path / "a", durability="eventually")
    with pytest.raises(siltdb.ConfigError, match="flush_threads"):
        siltdb.connect(tmp_path / "b", flush_threads=0)
    with pytest.raises(siltdb.ConfigError, match="path"):
        siltdb.connect(42)


def test_locked(tmp_path):
    with siltdb.connect(tmp_path / "db", durability="none") as db:
        with pytest.raises(siltdb.LockedError, match="already open") as e:
            siltdb.connect(tmp_path / "db")
        assert e.value.path
        assert not db.closed


def test_storage_io_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(siltdb.StorageIOError) as e:
        siltdb.connect(blocker / "db")
    assert isinstance(e.value, OSError)
    assert "file" in e.value.path


def test_corruption_is_detected(tmp_path):
    path = tmp_path / "db"
    with siltdb.connect(path, durability="none") as db:
        ds = db.create_dataset("d", primary_key="id")
        ds.insert_many({"id": i, "v": "x" * 50} for i in range(2000))
        db.flush()
    files = sorted(path.glob("d/p0/primary/*.sc"))
    assert files
    data = bytearray(files[0].read_bytes())
    for i in range(100, len(data) - 100, 97):
        data[i] ^= 0xFF
    files[0].write_bytes(bytes(data))
    with pytest.raises(siltdb.CorruptionError) as e:
        with siltdb.connect(path) as db:
            list(db["d"].scan())
    assert e.value.path


def test_closed(tmp_path):
    db = siltdb.connect(tmp_path / "db", durability="none")
    ds = db.create_dataset("d", primary_key="id")
    ds.insert({"id": 1})
    it = ds.scan()
    db.close()
    assert db.closed
    for call in (
        lambda: ds.get(1),
        lambda: ds.insert({"id": 2}),
        lambda: next(it),
        lambda: db.datasets(),
        lambda: db.dataset("d"),
        lambda: db.stats(),
    ):
        with pytest.raises(siltdb.ClosedError):
            call()
    db.close()  # twice is fine
