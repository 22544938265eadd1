"""Results of ``Database.sql``: Arrow record batches handed over through the
Arrow C stream interface (the ``__arrow_c_stream__`` PyCapsule protocol), so
nothing is serialized and the native module does not depend on a pyarrow
version."""

from __future__ import annotations

from typing import Any, Iterator


class SqlResult:
    """The result of a SQL query.

    ``to_arrow()`` returns a ``pyarrow.Table``, ``to_pandas()`` a
    ``pandas.DataFrame``, ``to_geopandas()`` a ``geopandas.GeoDataFrame``
    and ``rows()`` a list of dicts (all need pyarrow; pandas and geopandas
    for theirs). As a DB-API cursor's results: ``fetchone()``,
    ``fetchmany(n)``, ``fetchall()`` and iteration give tuples,
    ``description`` names the columns. The result is also an Arrow stream
    itself (``__arrow_c_stream__``): ``pyarrow.table(r)``,
    ``polars.from_arrow(r)`` or DuckDB read it without a copy.
    ``ipc_bytes`` is the result as an Arrow IPC stream.
    """

    def __init__(self, batches: Any) -> None:
        self._batches = batches
        self._table: Any = None
        self._tuples: list[tuple[Any, ...]] | None = None
        self._next = 0

    def _all_tuples(self) -> list[tuple[Any, ...]]:
        if self._tuples is None:
            t = self.to_arrow()
            columns = [c.to_pylist() for c in t.columns]
            self._tuples = list(zip(*columns)) if columns else []
        return self._tuples

    @property
    def description(self) -> list[tuple[Any, ...]]:
        """DB-API column descriptions: ``(name, type_code, None, None, None,
        None, null_ok)`` per column, ``type_code`` the Arrow type's name
        (``int64``, ``string``, ``double``...)."""
        schema = self.to_arrow().schema
        return [(f.name, str(f.type), None, None, None, None, f.nullable) for f in schema]

    @property
    def rowcount(self) -> int:
        """The number of rows (DB-API)."""
        return len(self)

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row as a tuple, or None after the last."""
        rows = self._all_tuples()
        if self._next >= len(rows):
            return None
        self._next += 1
        return rows[self._next - 1]

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        """The next ``size`` rows (fewer at the end) as tuples."""
        rows = self._all_tuples()
        out = rows[self._next : self._next + max(size, 0)]
        self._next += len(out)
        return out

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The remaining rows as tuples."""
        rows = self._all_tuples()
        out = rows[self._next :]
        self._next = len(rows)
        return out

    def to_geopandas(self, geometry: Any = None, crs: str = "EPSG:4326") -> Any:
        """The result as a ``geopandas.GeoDataFrame``: the columns named by
        ``geometry`` (a name or a list; by default every text column whose
        values are all WKT) become geometries, the first one active.
        Coordinates are longitude/latitude unless ``crs`` says otherwise."""
        from ._geo import result_to_geopandas

        return result_to_geopandas(self.to_arrow(), geometry, crs)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The result as an Arrow C stream (a PyCapsule)."""
        return self._batches.__arrow_c_stream__(requested_schema)

    @property
    def ipc_bytes(self) -> bytes:
        """The result as one Arrow IPC stream."""
        data: bytes = self._batches.ipc_bytes()
        return data

    def to_arrow(self) -> Any:
        """The result as a ``pyarrow.Table``."""
        if self._table is None:
            try:
                import pyarrow as pa  # type: ignore[import-untyped]
            except ImportError as e:  # pragma: no cover - depends on the env
                raise ImportError(
                    "SqlResult.to_arrow() needs pyarrow: pip install pyarrow"
                ) from e
            import_capsule = getattr(pa.RecordBatchReader, "_import_from_c_capsule", None)
            if import_capsule is not None:
                reader = import_capsule(self._batches.__arrow_c_stream__())
                self._table = reader.read_all()
            else:  # pragma: no cover - a pyarrow without the capsule interface
                import pyarrow.ipc as ipc  # type: ignore[import-untyped]

                with ipc.open_stream(self.ipc_bytes) as r:
                    self._table = r.read_all()
        return self._table

    def to_pandas(self) -> Any:
        """The result as a ``pandas.DataFrame``."""
        return self.to_arrow().to_pandas()

    def rows(self) -> list[dict[str, Any]]:
        """The result as a list of dicts (column name to value)."""
        rows: list[dict[str, Any]] = self.to_arrow().to_pylist()
        return rows

    def __len__(self) -> int:
        return len(self._batches)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """The remaining rows as tuples, as a DB-API cursor iterates."""
        while (row := self.fetchone()) is not None:
            yield row

    def __repr__(self) -> str:
        try:
            t = self.to_arrow()
            return f"<siltdb.SqlResult {t.num_rows} rows x {t.num_columns} columns>"
        except ImportError:
            return f"<siltdb.SqlResult {len(self)} rows>"
