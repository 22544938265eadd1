"""Type stubs of siltdb (the native classes live in siltdb._siltdb)."""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Mapping, Sequence, Union, final


from ._errors import (
    AlreadyExistsError as AlreadyExistsError,
    ClosedError as ClosedError,
    ConflictError as ConflictError,
    ForeignKeyError as ForeignKeyError,
    ConfigError as ConfigError,
    CorruptionError as CorruptionError,
    DuplicateKeyError as DuplicateKeyError,
    Error as Error,
    InternalError as InternalError,
    InvalidInputError as InvalidInputError,
    LockedError as LockedError,
    NotFoundError as NotFoundError,
    SqlError as SqlError,
    StorageIOError as StorageIOError,
    TooLargeError as TooLargeError,
    TransactionError as TransactionError,
)
from ._sql import SqlResult as SqlResult

__all__ = [
    "connect",
    "Database",
    "Dataset",
    "BatchReport",
    "Transaction",
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

__version__: str

_Record = dict[str, Any]
#: A primary key or index bound: one value, or a tuple of values
#: (a composite key, or a prefix of one).
_Key = Any
#: GeoJSON dict, WKT string, [lon, lat], or (min_x, min_y, max_x, max_y).
_GeometryLike = Union[Mapping[str, Any], str, Sequence[float]]
_Size = Union[int, str]

def connect(
    path: Union[str, os.PathLike[str]],
    durability: str = "sync",
    *,
    block_cache: _Size | None = None,
    flush_threads: int | None = None,
    merge_threads: int | None = None,
    checkpoint_interval: _Size | None = None,
    fsync: bool = True,
) -> Database: ...

@final
class Database:
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def create_dataset(
        self,
        name: str,
        primary_key: Union[str, Sequence[str]],
        fields: Mapping[str, str] | None = None,
        *,
        partitions: int = 1,
        memory_budget: _Size | None = None,
        merge_policy: str | None = None,
        compression: str | None = None,
        block_size: _Size | None = None,
        ttl: Mapping[str, str | int] | None = None,
        references: Sequence[Mapping[str, str | Sequence[str]]] | None = None,
        remote: str | None = None,
        remote_level: int = 0,
    ) -> Dataset: ...
    def add_foreign_key(
        self,
        dataset: str,
        fields: Union[str, Sequence[str]],
        parent: str,
        *,
        on_delete: str = "restrict",
        name: str | None = None,
    ) -> None: ...
    def drop_foreign_key(self, dataset: str, name: str) -> None: ...
    def dataset(self, name: str) -> Dataset: ...
    def __getitem__(self, name: str, /) -> Dataset: ...
    def transaction(self) -> Transaction: ...
    def pubsub(
        self,
        name: str,
        *,
        design: str | None = None,
        delivery: bool | None = None,
        partitions: int | None = None,
        merge_policy: str | None = None,
        grace: int | None = None,
        hierarchy: str | None = None,
        depth: int | None = None,
        fanout: int | None = None,
    ) -> PubSub: ...
    def drop_pubsub(self, name: str) -> None: ...
    def pubsubs(self) -> dict[str, dict[str, Any]]: ...
    def datasets(self) -> list[str]: ...
    def drop_dataset(self, name: str) -> None: ...
    def create_index(
        self,
        dataset: str,
        name: str,
        kind: str,
        fields: Union[str, Sequence[str]],
        *,
        merge_policy: str | None = None,
        reconcile: str | None = None,
        gram: int | None = None,
        space: tuple[float, float, float, float] | None = None,
        leaf_bytes: int | None = None,
        bits_per_key: float | None = None,
        chunk_bytes: int | None = None,
        brin_form: str | None = None,
        time: str | None = None,
        expiry: str | None = None,
        grace: int | None = None,
        clock: str | None = None,
    ) -> dict[str, Any]: ...
    def drop_index(self, dataset: str, name: str) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def recovery(self) -> dict[str, Any]: ...
    def flush(self) -> None: ...
    def checkpoint(self) -> dict[str, Any]: ...
    def wait_idle(self) -> None: ...
    def sql(self, query: str) -> SqlResult: ...
    def load_geodataframe(
        self,
        name: str,
        frame: Any,
        primary_key: str | None = None,
        index: str | None = "rtree",
        batch: int = 5000,
    ) -> Dataset: ...
    def read_geoparquet(
        self, name: str, path: str, primary_key: str | None = None, index: str | None = "rtree"
    ) -> Dataset: ...
    def close(self) -> None: ...
    def __enter__(self) -> Database: ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...

_Id = Union[int, str, bytes, Sequence[int]]

@final
class PubSub:
    def subscribe(
        self,
        id: _Id,
        *,
        sid: int,
        uid: int,
        ts: int,
        tmin: int,
        tmax: int,
        self_join: bool = False,
        words: str | Sequence[str] | None = None,
        region: tuple[float, float, float, float] | None = None,
    ) -> dict[str, list[dict[str, Any]]]: ...
    def publish(
        self,
        id: _Id,
        *,
        pid: int,
        tp: int,
        tmax: int,
        desc: str = "",
        since: int | None = None,
        loc: tuple[float, float] | None = None,
    ) -> dict[str, list[dict[str, Any]]]: ...
    def listen(self, uid: int, *, timeout: float | None = None) -> Listener: ...
    def datasets(self) -> list[str]: ...

@final
class Listener(Iterator[dict[str, Any]]):
    def __iter__(self) -> Listener: ...
    def __next__(self) -> dict[str, Any]: ...
    def poll(self, timeout: float = 0.0) -> dict[str, Any] | None: ...
    def ack(self, seq: int | None = None) -> None: ...
    @property
    def cursor(self) -> int: ...

@final
class Transaction:
    @property
    def pending_writes(self) -> int: ...
    @property
    def active(self) -> bool: ...
    def insert(self, dataset: Union[str, Dataset], record: Mapping[str, Any]) -> None: ...
    def upsert(self, dataset: Union[str, Dataset], record: Mapping[str, Any]) -> None: ...
    def delete(self, dataset: Union[str, Dataset], pk: Any) -> bool: ...
    def get(self, dataset: Union[str, Dataset], pk: Any) -> dict[str, Any] | None: ...
    def scan(
        self,
        dataset: Union[str, Dataset],
        lo: Any = None,
        hi: Any = None,
        *,
        limit: int | None = None,
    ) -> list[dict[str, Any]]: ...
    def savepoint(self, name: str) -> None: ...
    def rollback_to(self, name: str) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def __enter__(self) -> Transaction: ...
    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> bool: ...

@final
class BatchReport:
    committed: int
    failed: list[tuple[int, Error]]
    not_attempted: int

@final
class QueryIterator(Iterator[dict[str, Any]]):
    def __iter__(self) -> QueryIterator: ...
    def __next__(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, int]: ...

@final
class JoinIterator(Iterator[dict[str, Any]]):
    def __iter__(self) -> JoinIterator: ...
    def __next__(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, int]: ...

@final
class ScanIterator(Iterator[_Record]):
    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> _Record: ...

@final
class Dataset:
    @property
    def name(self) -> str: ...
    def __datafusion_table_provider__(self, session: Any) -> Any: ...
    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...
    def insert(self, record: Mapping[str, Any]) -> None: ...
    def upsert(self, record: Mapping[str, Any]) -> None: ...
    def delete(self, pk: _Key) -> bool: ...
    def insert_many(
        self,
        records: Iterable[Mapping[str, Any]],
        atomic: bool = False,
        stop_on_error: bool = True,
        raise_errors: bool = True,
    ) -> BatchReport: ...
    def upsert_many(
        self,
        records: Iterable[Mapping[str, Any]],
        atomic: bool = False,
        stop_on_error: bool = True,
        raise_errors: bool = True,
    ) -> BatchReport: ...
    def get(self, pk: _Key) -> _Record | None: ...
    def __contains__(self, pk: _Key, /) -> bool: ...
    def scan(
        self,
        lo: _Key | None = None,
        hi: _Key | None = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
    ) -> ScanIterator: ...
    def __iter__(self) -> ScanIterator: ...
    def flush(self) -> None: ...
    def compact(self) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def definition(self) -> dict[str, Any]: ...
    def indexes(self) -> list[dict[str, Any]]: ...
    def to_geopandas(self, crs: str = "EPSG:4326") -> Any: ...
    def range(
        self,
        index: str,
        lo: _Key | None = None,
        hi: _Key | None = None,
        *,
        lo_inclusive: bool = True,
        hi_inclusive: bool = True,
        limit: int | None = None,
        index_only: bool = False,
    ) -> QueryIterator: ...
    def intersects(
        self, index: str, geometry: _GeometryLike, *, limit: int | None = None, index_only: bool = False
    ) -> QueryIterator: ...
    def within_distance(
        self,
        index: str,
        lon: float,
        lat: float,
        metres: float,
        *,
        limit: int | None = None,
        index_only: bool = False,
    ) -> QueryIterator: ...
    def nearest(
        self, index: str, lon: float, lat: float, k: int, *, index_only: bool = False
    ) -> QueryIterator: ...
    def text(
        self,
        index: str,
        text: str,
        all: bool = True,
        *,
        limit: int | None = None,
        index_only: bool = False,
    ) -> QueryIterator: ...
    def recent(
        self, index: str, lo: _Key, hi: _Key | None = None, k: int | None = None
    ) -> QueryIterator: ...
    def spatial_join(
        self,
        index: str,
        probes: Iterable[tuple[Any, _GeometryLike]],
        *,
        within_metres: float | None = None,
        limit: int | None = None,
        index_only: bool = False,
    ) -> JoinIterator: ...
