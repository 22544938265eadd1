"""A dataset inside other engines' queries: a DataFusion Python session
(the FFI table provider) and DuckDB / pyarrow (the Arrow C stream)."""

from __future__ import annotations

import pytest


def sql_or_skip(db, query):
    try:
        return db.sql(query)
    except NotImplementedError:
        pytest.skip("siltdb was built without the `sql` feature")


def cities(db, n=3):
    sql_or_skip(
        db,
        "CREATE TABLE cities (id BIGINT PRIMARY KEY, name VARCHAR, pop BIGINT, loc POINT)",
    )
    db.sql("CREATE INDEX cities_pop ON cities (pop)")
    ds = db.dataset("cities")
    ds.insert_many(
        {"id": i, "name": f"c{i}", "pop": i * 10, "loc": {"type": "Point", "coordinates": [i % 90, i % 45]}}
        for i in range(1, n + 1)
    )
    return ds


def test_a_datafusion_session_joins_a_silt_table(db):
    datafusion = pytest.importorskip("datafusion")
    ds = cities(db, 3)
    ctx = datafusion.SessionContext()
    ctx.register_table("cities", ds)
    ctx.from_pydict({"id": [1, 3, 4], "country": ["x", "y", "z"]}, name="countries")
    got = ctx.sql(
        "SELECT c.name, k.country FROM cities c JOIN countries k ON c.id = k.id ORDER BY c.id"
    ).to_pydict()
    assert got == {"name": ["c1", "c3"], "country": ["x", "y"]}
    # Filters on the key and on an indexed column: the right rows.
    assert ctx.sql("SELECT name FROM cities WHERE id = 2").to_pydict() == {"name": ["c2"]}
    got = ctx.sql("SELECT id FROM cities WHERE pop >= 20 ORDER BY id").to_pydict()
    assert got == {"id": [2, 3]}
    # Silt took the filter (declared exact: its index answers it) and
    # runs the scan.
    plan = "\n".join(ctx.sql("EXPLAIN SELECT name FROM cities WHERE pop = 20").to_pydict()["plan"])
    assert "full_filters=[cities.pop = Int64(20)]" in plan, plan
    assert "SiltScanExec" in plan, plan
    # The table is read at each query: rows written later are there.
    db.sql("INSERT INTO cities VALUES (4, 'c4', 40, ST_Point(1, 1))")
    assert ctx.sql("SELECT count(*) AS n FROM cities").to_pydict() == {"n": [4]}
    # Geometries come as Silt's SQL gives them (WKT).
    got = ctx.sql("SELECT loc FROM cities WHERE id = 4").to_pydict()
    assert got == {"loc": ["POINT(1 1)"]}


def test_a_session_without_the_codec_is_refused_clearly(db):
    ds = cities(db, 1)
    with pytest.raises(TypeError, match="SessionContext"):
        ds.__datafusion_table_provider__(object())


def test_duckdb_and_pyarrow_scan_a_dataset_as_a_stream(db):
    duckdb = pytest.importorskip("duckdb")
    pa = pytest.importorskip("pyarrow")
    n = 20_000  # more than one batch
    ds = cities(db, n)
    con = duckdb.connect()
    got = con.sql("SELECT count(*), sum(pop), max(name) FROM ds").fetchall()
    assert got == [(n, 10 * n * (n + 1) // 2, "c9999")]
    t = pa.table(ds)
    assert t.num_rows == n
    assert t.column_names == ["id", "name", "pop", "loc"]
    assert sorted(t.column("id").to_pylist())[:3] == [1, 2, 3]
    # A dataset that was dropped: a clear error, not a crash.
    db.sql("DROP TABLE cities")
    with pytest.raises(Exception, match="cities"):
        pa.table(ds)
