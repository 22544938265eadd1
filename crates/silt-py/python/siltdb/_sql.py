"""Results of ``Database.sql``: Arrow record batches handed over through the
Arrow C stream interface (the ``__arrow_c_stream__`` PyCapsule protocol), so
nothing is serialized and the native module does not depend on a pyarrow
version."""

from __future__ import annotations

from typing import Any, Iterator


class SqlResult:
    """The result of a SQL query.

    ``to_arrow()`` returns a ``pyarrow.Table``, ``to_pandas()`` a
    ``pandas.DataFrame`` (both need pyarrow; pandas for the latter) and
    ``rows()`` a list of dicts (pyarrow needed too). The result is also an
    Arrow stream itself (``__arrow_c_stream__``): ``pyarrow.table(r)``,
    ``polars.from_arrow(r)`` or DuckDB read it without a copy.
    ``ipc_bytes`` is the result as an Arrow IPC stream.
    """

    def __init__(self, batches: Any) -> None:
        self._batches = batches
        self._table: Any = None

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

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def __repr__(self) -> str:
        try:
            t = self.to_arrow()
            return f"<siltdb.SqlResult {t.num_rows} rows x {t.num_columns} columns>"
        except ImportError:
            return f"<siltdb.SqlResult {len(self)} rows>"
