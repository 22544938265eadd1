"""siltdb: Python bindings of Silt, an embeddable LSM database.

Quick start::

    import siltdb

    with siltdb.connect("mydb") as db:
        places = db.create_dataset(
            "places", primary_key="id", fields={"loc": "point", "name": "string"}
        )
        db.create_index("places", "by_loc", "rtree", "loc")
        places.insert({"id": 1, "name": "Eiffel Tower", "loc": [2.2945, 48.8584]})
        for hit in places.nearest("by_loc", 2.35, 48.85, k=3):
            print(hit["pk"], hit["distance_m"], hit["record"]["name"])

Records are dicts; values are None, bool, int (int64), float, str, bytes,
lists and dicts, and geometries (GeoJSON dicts, WKT strings or ``[lon,
lat]`` in fields declared ``point``/``rectangle``/``polygon``/``geometry``;
read back as GeoJSON dicts). Errors derive from :class:`siltdb.Error`.
Every call releases the GIL while the engine works, so threads run in
parallel.
"""

from __future__ import annotations

from ._errors import (
    AlreadyExistsError,
    ClosedError,
    ConfigError,
    ConflictError,
    CorruptionError,
    DuplicateKeyError,
    Error,
    ForeignKeyError,
    InternalError,
    InvalidInputError,
    LockedError,
    NotFoundError,
    SqlError,
    StorageIOError,
    TooLargeError,
    TransactionError,
)
import atexit as _atexit
import os as _os
import weakref as _weakref
from typing import Any as _Any
from typing import Union as _Union

from ._siltdb import (
    BatchReport,
    Database,
    Dataset,
    JoinIterator,
    Listener,
    PubSub,
    QueryIterator,
    ScanIterator,
    Transaction,
    __version__,
)
from ._siltdb import connect as _connect
from ._sql import SqlResult

# Databases still open when the interpreter exits are closed (flushed and
# checkpointed) then, so that data written with durability="none" is kept.
_open_databases: "_weakref.WeakSet[Database]" = _weakref.WeakSet()


def connect(path: _Union[str, "_os.PathLike[str]"], durability: str = "sync", **options: _Any) -> Database:
    """Open (or create) the database in directory ``path``.

    - ``durability``: ``"sync"`` (default: a write returns once its commit
      is fsynced), ``"batched"`` / ``"batched(<ms>)"`` (fsynced within ms; an
      OS crash may lose the last ms), or ``"none"`` (never fsynced by the
      log; flushes and close() still make data durable).
    - ``block_cache``: block cache size (bytes or a string such as ``"256MB"``).
    - ``flush_threads``, ``merge_threads``: background threads.
    - ``checkpoint_interval``: checkpoint after this much log (0 = only on
      flush and close).
    - ``fsync``: fsync component files (turn off only for throw-away data).

    Use the result as a context manager, or call ``close()``. Raises
    :class:`LockedError` if another process holds the database open.
    """
    db = _connect(path, durability, **options)
    _open_databases.add(db)
    return db


@_atexit.register
def _close_all() -> None:
    for db in list(_open_databases):
        try:
            db.close()
        except Error:
            pass

__all__ = [
    "connect",
    "Database",
    "Dataset",
    "BatchReport",
    "Transaction",
    "PubSub",
    "Listener",
    "QueryIterator",
    "ScanIterator",
    "JoinIterator",
    "SqlResult",
    "Error",
    "InvalidInputError",
    "TooLargeError",
    "ConfigError",
    "DuplicateKeyError",
    "NotFoundError",
    "AlreadyExistsError",
    "CorruptionError",
    "StorageIOError",
    "LockedError",
    "ClosedError",
    "ConflictError",
    "ForeignKeyError",
    "TransactionError",
    "SqlError",
    "InternalError",
    "__version__",
]
