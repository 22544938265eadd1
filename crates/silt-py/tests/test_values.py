"""Python <-> Silt value conversion: every type round-trips, bad input is refused
with a typed error that names the field."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

import pytest

import siltdb


@pytest.fixture
def ds(db):
    return db.create_dataset("v", primary_key="id")


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63 - 1,
        -(2**63),
        0.0,
        -0.0,
        1.5,
        -3.25e300,
        5e-324,
        math.inf,
        -math.inf,
        "",
        "héllo wörld ✓ 𝄞",
        "a\x00b",
        b"",
        b"\x00\xff\x10",
        [],
        [1, "two", 3.0, None, [True, b"x"]],
        {},
        {"a": {"b": {"c": [1, {"d": None}]}}},
        {"z": 1, "a": 2, "m": 3},
    ],
)
def test_round_trip(ds, value):
    ds.insert({"id": 1, "v": value})
    got = ds.get(1)["v"]
    assert got == value
    assert type(got) is type(value)
    if isinstance(value, float) and value == 0.0:
        assert math.copysign(1, got) == math.copysign(1, value)
    if isinstance(value, dict):
        assert list(got) == list(value), "field order is kept"


def test_nan_round_trips(ds):
    ds.insert({"id": 1, "v": math.nan, "l": [math.nan]})
    rec = ds.get(1)
    assert math.isnan(rec["v"]) and math.isnan(rec["l"][0])


def test_record_field_order_kept(ds):
    rec = {"id": 7, "zeta": 1, "alpha": 2, "mid": {"y": 1, "x": 2}}
    ds.insert(rec)
    got = ds.get(7)
    assert got == rec
    assert list(got) == list(rec)
    assert list(got["mid"]) == ["y", "x"]


def test_tuple_bytearray_memoryview_convert(ds):
    ds.insert({"id": 1, "t": (1, 2), "ba": bytearray(b"ab"), "mv": memoryview(b"cd")})
    assert ds.get(1) == {"id": 1, "t": [1, 2], "ba": b"ab", "mv": b"cd"}


def test_number_like_objects(ds):
    class Index:
        def __index__(self):
            return 42

    class Floaty:
        def __float__(self):
            return 2.5

    ds.insert({"id": 1, "i": Index(), "f": Floaty()})
    assert ds.get(1) == {"id": 1, "i": 42, "f": 2.5}


def test_int_out_of_range(ds):
    for big in (2**63, -(2**63) - 1, 10**30):
        with pytest.raises(siltdb.InvalidInputError) as e:
            ds.insert({"id": 1, "n": big})
        assert e.value.field == "n"
        assert "int64" in str(e.value)
    with pytest.raises(siltdb.InvalidInputError):
        ds.insert({"id": 2**64})
    assert ds.get(1) is None


def test_unsupported_types_name_the_field(ds):
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 1, "a": {"b": [1, {2, 3}]}})
    assert e.value.field == "a.b.1"
    assert "set" in str(e.value)
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 1, "when": datetime.time(12, 0)})
    assert e.value.field == "when"
    assert "time" in str(e.value)
    # Also a ValueError, for code that catches built-ins.
    with pytest.raises(ValueError):
        ds.insert({"id": 1, "x": object()})


def test_dict_keys_must_be_str(ds):
    with pytest.raises(siltdb.InvalidInputError, match="keys must be str"):
        ds.insert({"id": 1, "m": {1: "one"}})


def test_record_must_be_dict(ds):
    with pytest.raises(siltdb.InvalidInputError, match="must be a dict"):
        ds.insert([("id", 1)])
    with pytest.raises(siltdb.InvalidInputError):
        ds.insert(None)


def test_nesting_limit_and_cycles(ds):
    deep = 1
    for _ in range(70):
        deep = [deep]
    with pytest.raises(siltdb.InvalidInputError, match="deeper than"):
        ds.insert({"id": 1, "deep": deep})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(siltdb.InvalidInputError, match="deeper than"):
        ds.insert({"id": 1, "c": cyclic})
    ok = 1
    for _ in range(40):
        ok = [ok]
    ds.insert({"id": 2, "ok": ok})
    assert ds.get(2)["ok"] == ok


def test_missing_primary_key_is_refused(ds):
    with pytest.raises(siltdb.InvalidInputError):
        ds.insert({"other": 1})


@pytest.mark.parametrize(
    "key",
    [0, -5, 2**62, "text", "", b"\x00bin", 1.5, True],
)
def test_key_types(db, key):
    ds = db.create_dataset("k", primary_key="id")
    ds.insert({"id": key, "v": 1})
    assert ds.get(key) == {"id": key, "v": 1}
    assert key in ds
    assert ds.delete(key) is True
    assert ds.get(key) is None
    assert ds.delete(key) is False


def test_composite_key_and_prefix_scan(db):
    ds = db.create_dataset("c", primary_key=["user", "n"], fields={"user": "string", "n": "int"})
    for u in ("ann", "bob", "cy"):
        for n in range(5):
            ds.insert({"user": u, "n": n, "v": f"{u}{n}"})
    assert ds.get(("bob", 3)) == {"user": "bob", "n": 3, "v": "bob3"}
    assert ds.get(["bob", 3])["v"] == "bob3"
    assert [r["v"] for r in ds.scan(("bob",), ("bob",))] == [f"bob{n}" for n in range(5)]
    assert [r["v"] for r in ds.scan(("bob", 1), ("bob", 3))] == ["bob1", "bob2", "bob3"]
    got = [r["v"] for r in ds.scan(("bob", 1), ("bob", 3), lo_inclusive=False, hi_inclusive=False)]
    assert got == ["bob2"]
    assert [r["v"] for r in ds.scan("cy")] == [f"cy{n}" for n in range(5)]
    assert len(list(ds)) == 15
    assert ds.delete(("ann", 0))
    assert ds.get(("ann", 0)) is None


def test_declared_types_coerce(db):
    ds = db.create_dataset(
        "t",
        primary_key="id",
        fields={"i": "int", "d": "double", "b": "binary", "s": "string", "f": "bool"},
    )
    ds.insert({"id": 1, "i": 3.0, "d": 2, "b": "AAE=", "s": "x", "f": True})
    assert ds.get(1) == {"id": 1, "i": 3, "d": 2.0, "b": b"\x00\x01", "s": "x", "f": True}
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 2, "i": 3.5})
    assert e.value.field == "i"
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 2, "f": 1})
    assert e.value.field == "f"


POINT = {"type": "Point", "coordinates": [2.2945, 48.8584]}
SQUARE = {"type": "Polygon", "coordinates": [[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]]}
TRIANGLE_WITH_HOLE = {
    "type": "Polygon",
    "coordinates": [
        [[0.0, 0.0], [10.0, 0.0], [5.0, 8.0], [0.0, 0.0]],
        [[4.0, 1.0], [6.0, 1.0], [5.0, 3.0], [4.0, 1.0]],
    ],
}


@pytest.mark.parametrize(
    "given,expected",
    [
        ([2.2945, 48.8584], POINT),
        ((2.2945, 48.8584), POINT),
        (POINT, POINT),
        ("POINT(2.2945 48.8584)", POINT),
        ({"lon": 2.2945, "lat": 48.8584}, POINT),
        ({"type": "Feature", "geometry": POINT, "properties": {}}, POINT),
    ],
)
def test_point_forms(db, given, expected):
    ds = db.create_dataset("g", primary_key="id", fields={"loc": "point"})
    ds.insert({"id": 1, "loc": given})
    assert ds.get(1)["loc"] == expected


def test_rectangle_and_polygon_round_trip(db):
    ds = db.create_dataset(
        "g", primary_key="id", fields={"box": "rectangle", "poly": "polygon", "any": "geometry"}
    )
    ds.insert({"id": 1, "box": (0, 0, 1, 1), "poly": TRIANGLE_WITH_HOLE, "any": [3, 4]})
    rec = ds.get(1)
    assert rec["box"]["type"] == "Polygon"
    assert rec["box"]["bbox"] == [0.0, 0.0, 1.0, 1.0]
    assert rec["box"]["coordinates"] == SQUARE["coordinates"]
    assert rec["poly"] == TRIANGLE_WITH_HOLE
    assert rec["any"] == {"type": "Point", "coordinates": [3.0, 4.0]}
    # What comes out goes back in unchanged (a rectangle stays a rectangle).
    ds.upsert(rec)
    assert ds.get(1) == rec
    ds.insert({"id": 2, "box": "POLYGON((0 0, 1 0, 1 1, 0 1, 0 0))", "poly": "POLYGON((0 0, 2 0, 2 2, 0 2, 0 0))", "any": SQUARE})
    rec2 = ds.get(2)
    assert rec2["box"] == rec["box"]
    assert rec2["poly"]["coordinates"][0][2] == [2.0, 2.0]


def test_geo_interface_objects(db):
    class Shape:
        __geo_interface__ = {"type": "Point", "coordinates": (1.0, 2.0)}

    ds = db.create_dataset("g", primary_key="id", fields={"loc": "point"})
    ds.insert({"id": 1, "loc": Shape()})
    assert ds.get(1)["loc"] == {"type": "Point", "coordinates": [1.0, 2.0]}


def test_bad_geometry_messages(db):
    ds = db.create_dataset("g", primary_key="id", fields={"loc": "point", "poly": "polygon"})
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 1, "loc": "not a point"})
    assert e.value.field == "loc"
    with pytest.raises(siltdb.InvalidInputError) as e:
        ds.insert({"id": 1, "poly": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]]}})
    assert e.value.field == "poly"
    with pytest.raises(siltdb.InvalidInputError):
        ds.insert({"id": 1, "loc": [math.nan, 1.0]})
    assert ds.get(1) is None


def test_undeclared_geojson_stays_a_dict(ds):
    ds.insert({"id": 1, "g": POINT})
    assert ds.get(1)["g"] == POINT


def random_value(rng, depth=0):
    kinds = ["none", "bool", "int", "float", "str", "bytes"]
    if depth < 4:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, 1, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**63), 2**63)])
    if kind == "float":
        return rng.choice([0.0, -0.0, math.inf, -math.inf, rng.uniform(-1e300, 1e300), rng.random()])
    if kind == "str":
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x2FFF)])) for _ in range(rng.randrange(0, 12)))
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12)))
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {f"k{i}_{rng.randrange(100)}": random_value(rng, depth + 1) for i in range(rng.randrange(0, 5))}


def test_random_values_round_trip(db, tmp_path):
    import random

    rng = random.Random(7)
    ds = db.create_dataset("r", primary_key="id")
    written = {}
    for i in range(300):
        rec = {"id": i, "v": random_value(rng), "w": random_value(rng)}
        written[i] = rec
    ds.insert_many(written.values())
    for i, rec in written.items():
        assert ds.get(i) == rec
    db.flush()
    assert list(ds.scan()) == [written[i] for i in sorted(written)]


def test_declared_dates_times_and_decimals_are_python_objects(db):
    """Declared date, timestamp, timestamptz and decimal fields take and
    give datetime.date, datetime.datetime (naive; aware in UTC) and
    Decimal; text in their forms is read too; undeclared ones keep text."""
    ev = db.create_dataset(
        "ev",
        primary_key="day",
        fields={"day": "date", "at": "timestamptz", "local": "timestamp", "price": "decimal(10,2)"},
    )
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    ev.insert(
        {
            "day": datetime.date(2024, 3, 1),
            "at": datetime.datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=plus2),
            "local": datetime.datetime(2024, 3, 1, 12, 30),
            "price": Decimal("12.5"),
            "note": Decimal("1.10"),
        }
    )
    ev.insert({"day": "2024-03-02", "at": "2024-03-02T00:00:00Z", "price": "3"})
    got = ev.get(datetime.date(2024, 3, 1))
    assert got == {
        "day": datetime.date(2024, 3, 1),
        "at": datetime.datetime(2024, 3, 1, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc),
        "local": datetime.datetime(2024, 3, 1, 12, 30),
        "price": Decimal("12.50"),
        "note": "1.10",
    }
    rows = list(ev.scan())
    assert [r["day"] for r in rows] == [datetime.date(2024, 3, 1), datetime.date(2024, 3, 2)]
    assert rows[1]["price"] == Decimal("3.00") and isinstance(rows[1]["price"], Decimal)
    with db.transaction() as t:
        assert t.get(ev, "2024-03-02")["at"] == datetime.datetime(2024, 3, 2, tzinfo=datetime.timezone.utc)
    # Values the declared type refuses are refused with the field named.
    for bad in ({"day": datetime.date(2024, 3, 3), "price": Decimal("NaN")},
                {"day": datetime.date(2024, 3, 3), "price": Decimal("123456789.5")}):
        with pytest.raises(siltdb.InvalidInputError) as e:
            ev.insert(bad)
        assert e.value.field == "price"
    assert ev.get(datetime.date(2024, 3, 3)) is None


def test_declared_intervals_are_timedeltas(db):
    """A declared interval takes a timedelta or interval text and gives a
    timedelta, unless it has months (then its ISO 8601 text)."""
    jobs = db.create_dataset("jobs", primary_key="id", fields={"id": "int", "took": "interval"})
    spans = {1: datetime.timedelta(days=1, hours=2), 2: datetime.timedelta(days=-1, seconds=5),
             3: datetime.timedelta(microseconds=7)}
    for i, s in spans.items():
        jobs.insert({"id": i, "took": s})
    jobs.insert({"id": 4, "took": "1 mon 2 days"})
    jobs.insert({"id": 5, "took": "90 minutes"})
    for i, s in spans.items():
        assert jobs.get(i)["took"] == s
    assert jobs.get(4)["took"] == "P1M2D"
    assert jobs.get(5)["took"] == datetime.timedelta(minutes=90)
    with pytest.raises(siltdb.InvalidInputError) as e:
        jobs.insert({"id": 6, "took": "3 fortnights"})
    assert e.value.field == "took"


def test_declared_arrays_take_and_give_lists(db):
    """An array field (`int[]`, `date[]`, `decimal(6,2)[]`) takes a list or
    PostgreSQL's `{...}` text and gives a list, its elements typed."""
    from decimal import Decimal

    ev = db.create_dataset(
        "tagged", primary_key="id",
        fields={"id": "int", "ns": "int[]", "days": "date[]", "prices": "decimal(6,2)[]"},
    )
    ev.insert({"id": 1, "ns": [1, None, 3.0], "days": [datetime.date(2024, 2, 29), "2024-03-01"],
               "prices": [Decimal("1.5"), 2]})
    ev.insert({"id": 2, "ns": "{4, 5}", "days": [], "prices": None})
    got = ev.get(1)
    assert got["ns"] == [1, None, 3]
    assert got["days"] == [datetime.date(2024, 2, 29), datetime.date(2024, 3, 1)]
    assert got["prices"] == [Decimal("1.50"), Decimal("2.00")]
    assert ev.get(2)["ns"] == [4, 5] and ev.get(2)["days"] == []
    for bad, word in [({"ns": ["x"]}, "element 1"), ({"ns": [[1]]}, "one dimension"),
                      ({"ns": 7}, "array of int"), ({"days": ["2024-13-01"]}, "element 1")]:
        with pytest.raises(siltdb.InvalidInputError) as e:
            ev.insert({"id": 3, **bad})
        assert word in str(e.value)
    assert ev.get(3) is None
