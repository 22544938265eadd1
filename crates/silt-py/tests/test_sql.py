"""db.sql(): SQL through silt-sql, results as Arrow / pandas / rows."""

from __future__ import annotations

import pytest

import siltdb
from conftest import haversine_m


def sql_or_skip(db, query):
    try:
        return db.sql(query)
    except NotImplementedError:
        pytest.skip("siltdb was built without the `sql` feature")


def test_ddl_dml_and_results(db):
    pytest.importorskip("pyarrow")
    sql_or_skip(db, "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, n BIGINT)")
    r = db.sql("INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)")
    assert r.rows() == [{"count": 3}]
    r = db.sql("SELECT id, name FROM t WHERE n > 15 ORDER BY id")
    assert r.rows() == [{"id": 2, "name": "b"}, {"id": 3, "name": "c"}]
    assert len(r) == 2
    table = r.to_arrow()
    assert table.column_names == ["id", "name"]
    assert table.num_rows == 2
    assert "2 rows" in repr(r)
    # As a DB-API cursor: tuples, then nothing more.
    assert r.description[0][:2] == ("id", "int64")
    assert [d[0] for d in r.description] == ["id", "name"]
    assert r.fetchone() == (2, "b")
    assert r.fetchall() == [(3, "c")]
    assert r.fetchone() is None and r.fetchall() == [] and list(r) == []
    r = db.sql("SELECT id, name FROM t ORDER BY id")
    assert r.fetchmany(2) == [(1, "a"), (2, "b")]
    assert list(r) == [(3, "c")]
    assert r.rowcount == 3
    # The SQL table is a dataset of the Python API, and the other way round.
    assert db["t"].get(2) == {"id": 2, "name": "b", "n": 20}
    db["t"].insert({"id": 4, "name": "d", "n": 40})
    assert db.sql("SELECT count(*) AS c FROM t").rows() == [{"c": 4}]
    assert db.sql("SELECT id FROM t WHERE n > 1000").rows() == []
    # Several statements: the last one's result.
    r = db.sql("DELETE FROM t WHERE id = 1; SELECT id FROM t ORDER BY id")
    assert [row["id"] for row in r.rows()] == [2, 3, 4]


def test_results_are_arrow_streams(db):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc as ipc

    sql_or_skip(db, "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE)")
    db.sql("INSERT INTO t VALUES (1, 'a', 0.5), (2, NULL, 1.5), (3, 'c', NULL)")
    r = db.sql("SELECT id, name, x FROM t ORDER BY id")
    # Any Arrow consumer reads the result itself (the PyCapsule protocol),
    # as often as it likes.
    t1 = pa.table(r)
    t2 = pa.RecordBatchReader.from_stream(r).read_all()
    assert t1.equals(t2)
    assert t1.to_pydict() == {"id": [1, 2, 3], "name": ["a", None, "c"], "x": [0.5, 1.5, None]}
    assert r.to_arrow().equals(t1)
    # The IPC stream holds the same table.
    with ipc.open_stream(r.ipc_bytes) as reader:
        assert reader.read_all().equals(t1)
    # An empty result and a statement without rows are streams too.
    empty = db.sql("SELECT id FROM t WHERE id > 100")
    assert pa.table(empty).num_rows == 0
    assert len(empty) == 0
    assert db.sql("CREATE TABLE u (id BIGINT PRIMARY KEY)").rows() == []


def test_to_pandas(db):
    pytest.importorskip("pandas")
    sql_or_skip(db, "CREATE TABLE t (id BIGINT PRIMARY KEY, x DOUBLE)")
    db.sql("INSERT INTO t VALUES (1, 0.5), (2, 1.5)")
    df = db.sql("SELECT id, x FROM t ORDER BY id").to_pandas()
    assert list(df["id"]) == [1, 2]
    assert list(df["x"]) == [0.5, 1.5]


def test_knn_matches_brute_force(db):
    pytest.importorskip("pyarrow")
    import random

    rng = random.Random(5)
    ds = db.create_dataset("p", primary_key="id", fields={"id": "int", "loc": "point"})
    db.create_index("p", "by_loc", "rtree", "loc")
    pts = {i: (rng.uniform(-5, 5), rng.uniform(40, 50)) for i in range(500)}
    ds.insert_many({"id": i, "loc": list(p)} for i, p in pts.items())
    r = sql_or_skip(
        db, "SELECT id FROM p ORDER BY ST_Distance(loc, ST_Point(1.0, 45.0)) LIMIT 5"
    )
    want = sorted(pts, key=lambda i: haversine_m(1.0, 45.0, *pts[i]))[:5]
    assert [row["id"] for row in r.rows()] == want
    assert [h["pk"] for h in ds.nearest("by_loc", 1.0, 45.0, 5)] == want


def test_sql_errors_are_typed(db):
    pytest.importorskip("pyarrow")
    sql_or_skip(db, "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    with pytest.raises(siltdb.DuplicateKeyError):
        db.sql("INSERT INTO t VALUES (1, 'again')")
    with pytest.raises(siltdb.SqlError):
        db.sql("SELEKT nonsense")
    with pytest.raises(siltdb.SqlError):
        db.sql("SELECT * FROM no_such_table")
    assert issubclass(siltdb.SqlError, siltdb.Error)


def test_close_after_sql_releases_the_lock(db_path):
    pytest.importorskip("pyarrow")
    db = siltdb.connect(db_path, durability="none")
    sql_or_skip(db, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    db.sql("INSERT INTO t VALUES (7)")
    db.close()
    with pytest.raises(siltdb.ClosedError):
        db.sql("SELECT 1")
    with siltdb.connect(db_path) as db2:
        assert db2.sql("SELECT id FROM t").rows() == [{"id": 7}]


def test_results_as_geodataframes(db):
    pytest.importorskip("pyarrow")
    gpd = pytest.importorskip("geopandas")
    sql_or_skip(db, "CREATE TABLE p (id BIGINT PRIMARY KEY, name VARCHAR, loc GEOMETRY)")
    db.sql(
        "INSERT INTO p VALUES (1, 'a', ST_Point(2.35, 48.85)), "
        "(2, 'b', ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 1,0 0))')), (3, 'c', NULL)"
    )
    g = db.sql("SELECT id, name, loc, ST_Buffer(loc, 1) AS around FROM p ORDER BY id").to_geopandas()
    assert isinstance(g, gpd.GeoDataFrame)
    assert g.geometry.name == "loc"
    assert g.crs.to_epsg() == 4326
    assert g.geometry.iloc[0].x == 2.35 and g.geometry.iloc[0].y == 48.85
    assert g.geometry.iloc[1].area == 1.0
    assert g.geometry.iloc[2] is None
    # Every WKT column became geometries; the name stays text.
    assert g["around"].iloc[1].area > 1.0
    assert list(g["name"]) == ["a", "b", "c"]
    # Named explicitly, one column.
    g = db.sql("SELECT ST_AsText(loc) AS w FROM p WHERE id = 1").to_geopandas("w")
    assert g.geometry.iloc[0].x == 2.35
    with pytest.raises(KeyError, match="nope"):
        db.sql("SELECT id FROM p").to_geopandas("nope")


def test_duckdb_reads_results_without_a_copy(db):
    pytest.importorskip("pyarrow")
    duckdb = pytest.importorskip("duckdb")
    sql_or_skip(db, "CREATE TABLE p (id BIGINT PRIMARY KEY, loc GEOMETRY)")
    db.sql("INSERT INTO p VALUES (1, ST_Point(1, 2)), (2, ST_Point(3, 4)), (3, NULL)")
    r = db.sql("SELECT id, ST_X(loc) AS x FROM p WHERE loc IS NOT NULL ORDER BY id")
    # DuckDB finds the result by its variable name (an Arrow stream).
    got = duckdb.sql("SELECT sum(x), count(*) FROM r").fetchone()
    assert got == (4.0, 2)
