"""Results of ``Database.sql``: Arrow record batches handed over as an Arrow
IPC stream (so the native module does not depend on a pyarrow version)."""

from __future__ import annotations

from typing import Any, Iterator


class SqlResult:
    """The result of a SQL query.

    ``to_arrow()`` returns a ``pyarrow.Table``, ``to_pandas()`` a
    ``pandas.DataFrame`` (both need pyarrow; pandas for the latter) and
    ``rows()`` a list of dicts (pyarrow needed too). ``ipc_bytes`` is the
    raw Arrow IPC stream.
    """

    def __init__(self, ipc_bytes: bytes) -> None:
        self.ipc_bytes = ipc_bytes
        self._table: Any = None

    def to_arrow(self) -> Any:
        """The result as a ``pyarrow.Table``."""
        if self._table is None:
            try:
                import pyarrow.ipc as ipc  # type: ignore[import-untyped]
            except ImportError as e:  # pragma: no cover - depends on the env
                raise ImportError(
                    "SqlResult.to_arrow() needs pyarrow: pip install pyarrow"
                ) from e
            with ipc.open_stream(self.ipc_bytes) as reader:
                self._table = reader.read_all()
        return self._table

    def to_pandas(self) -> Any:
        """The result as a ``pandas.DataFrame``."""
        return self.to_arrow().to_pandas()

    def rows(self) -> list[dict[str, Any]]:
        """The result as a list of dicts (column name to value)."""
        rows: list[dict[str, Any]] = self.to_arrow().to_pylist()
        return rows

    def __len__(self) -> int:
        return int(self.to_arrow().num_rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def __repr__(self) -> str:
        try:
            t = self.to_arrow()
            return f"<siltdb.SqlResult {t.num_rows} rows x {t.num_columns} columns>"
        except ImportError:
            return f"<siltdb.SqlResult {len(self.ipc_bytes)} bytes of Arrow IPC>"
