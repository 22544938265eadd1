"""GeoPandas in and out: datasets and SQL results as ``GeoDataFrame``s, and
GeoDataFrames or GeoParquet files loaded into datasets.

Silt's coordinates are longitude/latitude (EPSG:4326): a frame in another
CRS is reprojected on the way in; frames come out in EPSG:4326. Needs
``geopandas`` (and so ``shapely``): ``pip install geopandas``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Optional, Sequence, Union

GEOMETRY_TYPES = ("point", "rectangle", "polygon", "geometry")

# Well-known text of a geometry, with an optional EWKT SRID prefix.
_WKT = re.compile(
    r"^\s*(SRID=\d+;\s*)?(POINT|LINESTRING|POLYGON|MULTIPOINT|MULTILINESTRING|"
    r"MULTIPOLYGON|GEOMETRYCOLLECTION)\b",
    re.IGNORECASE,
)


def _geopandas() -> Any:
    try:
        import geopandas  # type: ignore[import-untyped]
    except ImportError as e:
        raise ImportError(
            "GeoDataFrames need geopandas: pip install geopandas"
        ) from e
    return geopandas


def _field_types(definition: dict[str, Any]) -> dict[str, str]:
    """Field name -> declared type name, from ``Dataset.definition()``."""
    fields = definition.get("fields") or {}
    pairs = fields.items() if isinstance(fields, dict) else fields
    out: dict[str, str] = {}
    for pair in pairs:
        name, ty = pair[0], pair[1]
        out[str(name)] = ty if isinstance(ty, str) else str(ty)
    return {k: v.lower() for k, v in out.items()}


def dataset_to_geopandas(dataset: Any, crs: str = "EPSG:4326") -> Any:
    """Every record of ``dataset`` as a GeoDataFrame: one column per field,
    geometry fields as shapely geometries, the first declared geometry field
    the active geometry."""
    gpd = _geopandas()
    from shapely.geometry import shape  # type: ignore[import-untyped]

    types = _field_types(dataset.definition())
    geo_fields = [f for f, t in types.items() if t in GEOMETRY_TYPES]
    rows = []
    for rec in dataset.scan():
        row = dict(rec)
        for f in geo_fields:
            v = row.get(f)
            row[f] = shape(v) if isinstance(v, dict) else None
        rows.append(row)
    import pandas as pd  # type: ignore[import-untyped]

    df = pd.DataFrame(rows)
    if not geo_fields:
        return gpd.GeoDataFrame(df)
    for f in geo_fields:
        if f not in df.columns:
            df[f] = None
        df[f] = gpd.GeoSeries(df[f], crs=crs)
    return gpd.GeoDataFrame(df, geometry=geo_fields[0], crs=crs)


def _missing(v: Any) -> bool:
    """None, NaN or pandas' NA (a null of a text column)."""
    if v is None:
        return True
    try:
        import pandas as pd  # type: ignore[import-untyped]

        return bool(pd.isna(v)) if not isinstance(v, (str, bytes)) else False
    except (ImportError, TypeError, ValueError):
        return False


def _looks_like_wkt(values: Iterable[Any]) -> bool:
    seen = False
    for v in values:
        if _missing(v):
            continue
        if not isinstance(v, str) or not _WKT.match(v):
            return False
        seen = True
    return seen


def result_to_geopandas(
    table: Any, geometry: Optional[Union[str, Sequence[str]]] = None, crs: str = "EPSG:4326"
) -> Any:
    """A pyarrow table of a SQL result as a GeoDataFrame: the named columns
    (or every text column all of whose values are WKT) parsed into
    geometries, the first of them active."""
    gpd = _geopandas()
    import pandas as pd  # type: ignore[import-untyped]
    import shapely  # type: ignore[import-untyped]

    df = table.to_pandas()
    if geometry is None:
        cols = [
            c
            for c in df.columns
            if (df[c].dtype == object or pd.api.types.is_string_dtype(df[c]))
            and _looks_like_wkt(df[c])
        ]
    elif isinstance(geometry, str):
        cols = [geometry]
    else:
        cols = list(geometry)
    for c in cols:
        if c not in df.columns:
            raise KeyError(f"the result has no column {c!r} (columns: {list(df.columns)})")
        texts = [None if _missing(v) else _strip_srid(v) for v in df[c]]
        df[c] = gpd.GeoSeries(shapely.from_wkt(texts), crs=crs)
    if not cols:
        return gpd.GeoDataFrame(df)
    return gpd.GeoDataFrame(df, geometry=cols[0], crs=crs)


def _strip_srid(text: str) -> str:
    if text[:5].upper() == "SRID=" and ";" in text:
        return text.split(";", 1)[1]
    return text


def _lists(v: Any) -> Any:
    """A GeoJSON mapping with its coordinate tuples as lists."""
    if isinstance(v, dict):
        return {k: _lists(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_lists(x) for x in v]
    return v


def _plain(v: Any) -> Any:
    """A value of a frame as Silt takes it (numpy scalars as Python ones;
    NaN, NaT and NA as missing)."""
    if v is None:
        return None
    item = getattr(v, "item", None)
    if item is not None and not isinstance(v, (str, bytes)):
        try:
            v = item()
        except (TypeError, ValueError):
            pass
    if isinstance(v, float) and math.isnan(v):
        return None
    try:
        import pandas as pd  # type: ignore[import-untyped]

        if v is pd.NaT or v is pd.NA:
            return None
        if isinstance(v, pd.Timestamp):
            return v.isoformat()
    except ImportError:  # pragma: no cover - geopandas needs pandas
        pass
    return v


def _field_type(series: Any, geometry: bool) -> Optional[str]:
    """The declared type of a new dataset's field for a frame column."""
    if geometry:
        kinds = set(series.geom_type.dropna())
        return "point" if kinds == {"Point"} else "geometry"
    kind = series.dtype.kind
    return {"i": "int", "u": "int", "f": "double", "b": "bool"}.get(
        kind, "string" if kind == "O" and all(isinstance(v, str) for v in series.dropna()) else None
    )


def load_geodataframe(
    db: Any,
    name: str,
    frame: Any,
    primary_key: Optional[str] = None,
    index: Optional[str] = "rtree",
    batch: int = 5000,
) -> Any:
    """Load a GeoDataFrame into dataset ``name`` (created when missing, its
    fields typed from the frame's columns) and return the dataset.

    - ``primary_key``: the column of unique keys; by default the frame's
      index (named by its name, or ``id``).
    - ``index``: the kind of spatial index built on the active geometry when
      the dataset is created (``rtree``, ``hilbert``...; None for none).
    - The frame is reprojected to EPSG:4326 when its CRS is another one.
    - Records are inserted ``batch`` at a time; a record Silt refuses (a
      duplicate key, a line string in a ``geometry`` field...) raises, with
      the records before its batch kept.
    """
    gpd = _geopandas()
    if not isinstance(frame, gpd.GeoDataFrame):
        raise TypeError(f"expected a geopandas.GeoDataFrame, got {type(frame).__name__}")
    if frame.crs is not None and frame.crs.to_epsg() != 4326:
        frame = frame.to_crs(4326)
    df = frame.copy()
    if primary_key is None:
        primary_key = df.index.name or "id"
        if primary_key in df.columns:
            raise ValueError(
                f"the frame's index would be the key column {primary_key!r}, "
                "but a column has that name; pass primary_key="
            )
        df = df.reset_index(names=primary_key)
    elif primary_key not in df.columns:
        raise KeyError(f"no column {primary_key!r} for the primary key (columns: {list(df.columns)})")
    geo_cols = [c for c in df.columns if isinstance(df[c].dtype, gpd.array.GeometryDtype)]
    from shapely.geometry import mapping  # type: ignore[import-untyped]

    if name in db.datasets():
        ds = db.dataset(name)
    else:
        fields = {}
        for c in df.columns:
            t = _field_type(df[c], c in geo_cols)
            if t is not None:
                fields[str(c)] = t
        ds = db.create_dataset(name, primary_key=str(primary_key), fields=fields)
        active = frame.geometry.name if frame.geometry is not None else None
        if index and active in geo_cols:
            db.create_index(name, f"{name}_{active}", index, str(active))
    records = []
    for row in df.to_dict("records"):
        rec = {}
        for k, v in row.items():
            if k in geo_cols:
                rec[str(k)] = None if v is None or v.is_empty else _lists(mapping(v))
            else:
                rec[str(k)] = _plain(v)
        records.append({k: v for k, v in rec.items() if v is not None})
        if len(records) >= batch:
            ds.insert_many(records)
            records = []
    if records:
        ds.insert_many(records)
    return ds


def read_geoparquet(
    db: Any,
    name: str,
    path: str,
    primary_key: Optional[str] = None,
    index: Optional[str] = "rtree",
) -> Any:
    """Load a GeoParquet file into dataset ``name`` (see
    :func:`load_geodataframe`)."""
    gpd = _geopandas()
    return load_geodataframe(db, name, gpd.read_parquet(path), primary_key, index)
