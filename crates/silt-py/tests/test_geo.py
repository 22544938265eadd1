"""GeoPandas in and out: Dataset.to_geopandas, Database.load_geodataframe
and Database.read_geoparquet (no SQL needed)."""

from __future__ import annotations

import pytest

gpd = pytest.importorskip("geopandas")
shapely_geometry = pytest.importorskip("shapely.geometry")
Point = shapely_geometry.Point
Polygon = shapely_geometry.Polygon


def frame():
    return gpd.GeoDataFrame(
        {
            "name": ["tower", "park", "square"],
            "height": [330.0, float("nan"), 12.5],
            "visits": [7, 3, 1],
            "geometry": [
                Point(2.2945, 48.8584),
                Polygon([(2.33, 48.84), (2.34, 48.84), (2.34, 48.85), (2.33, 48.85)]),
                Point(2.3522, 48.8566),
            ],
        },
        index=[10, 20, 30],
        crs="EPSG:4326",
    )


def test_a_frame_round_trips_through_a_dataset(db):
    ds = db.load_geodataframe("places", frame())
    d = ds.definition()
    assert d["primary_key"] == ["id"]
    assert ds.get(10)["name"] == "tower"
    assert "height" not in ds.get(20)  # NaN is a missing value
    assert ds.get(30)["visits"] == 1
    # A spatial index on the active geometry, answering queries.
    assert [i["name"] for i in ds.indexes()] == ["places_geometry"]
    hits = list(ds.intersects("places_geometry", [2.32, 48.83, 2.345, 48.855]))
    assert [h["pk"] for h in hits] == [[20]] or [h["pk"] for h in hits] == [20]
    back = ds.to_geopandas()
    assert isinstance(back, gpd.GeoDataFrame)
    assert back.crs.to_epsg() == 4326
    back = back.set_index("id").sort_index()
    assert list(back.index) == [10, 20, 30]
    assert back.geometry.iloc[0].equals(Point(2.2945, 48.8584))
    assert back.geometry.iloc[1].equals(frame().geometry.iloc[1])
    assert list(back["name"]) == ["tower", "park", "square"]


def test_another_crs_is_reprojected_and_keys_can_be_a_column(db):
    f = frame().to_crs(3857)
    f["code"] = ["a", "b", "c"]
    ds = db.load_geodataframe("m", f, primary_key="code", index=None)
    assert ds.indexes() == []
    rec = ds.get("a")
    x, y = rec["geometry"]["coordinates"]
    assert abs(x - 2.2945) < 1e-9 and abs(y - 48.8584) < 1e-9
    with pytest.raises(KeyError, match="nope"):
        db.load_geodataframe("n", f, primary_key="nope")
    with pytest.raises(TypeError, match="GeoDataFrame"):
        db.load_geodataframe("n", [1, 2])


def test_a_geoparquet_file_loads(db, tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "places.parquet"
    frame().to_parquet(path)
    ds = db.read_geoparquet("pq", str(path))
    assert len(list(ds.scan())) == 3
    assert ds.get(10)["geometry"]["type"] == "Point"


def test_refused_records_raise_and_name_the_problem(db):
    f = gpd.GeoDataFrame(
        {"geometry": [Point(0, 0), shapely_geometry.LineString([(0, 0), (1, 1)])]},
        crs="EPSG:4326",
    )
    import siltdb

    with pytest.raises(siltdb.Error):
        db.load_geodataframe("lines", f)
