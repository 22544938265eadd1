"""Exceptions raised by siltdb.

Every exception raised by the engine derives from :class:`Error`. Classes
also derive from the matching built-in where one fits, so ``except
ValueError`` catches bad input and ``except LookupError`` a missing dataset.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "InvalidInputError",
    "TooLargeError",
    "ConfigError",
    "DuplicateKeyError",
    "ForeignKeyError",
    "NotFoundError",
    "AlreadyExistsError",
    "CorruptionError",
    "StorageIOError",
    "LockedError",
    "ClosedError",
    "ConflictError",
    "TransactionError",
    "SqlError",
    "InternalError",
]


class Error(Exception):
    """Base class of every siltdb error."""


class InvalidInputError(Error, ValueError):
    """A record, key, value or query argument is not acceptable.

    ``field`` names the offending field (a dotted path for nested values)
    when known, else it is None.
    """

    field: str | None = None


class TooLargeError(InvalidInputError):
    """A key or record exceeds the engine's size limit."""


class ConfigError(Error, ValueError):
    """An option (durability, merge policy, index kind, field type...) is invalid."""


class DuplicateKeyError(Error):
    """``insert`` found a record with the same primary key.

    Attributes: ``dataset`` and ``key`` (the key as text).
    """

    dataset: str | None = None
    key: str | None = None


class ForeignKeyError(Error):
    """A write that would break a foreign key: a record naming a parent
    that does not exist, or a delete of a record others still reference
    (through a key that does not cascade). Nothing was changed.

    Attributes: ``dataset`` (the dataset written), ``constraint`` (the
    key's name) and ``other`` (the parent, or the referencing dataset).
    """

    dataset: str | None = None
    constraint: str | None = None
    other: str | None = None


class NotFoundError(Error, LookupError):
    """No dataset or index of that name. Attributes: ``dataset``, ``index``."""

    dataset: str | None = None
    index: str | None = None


class AlreadyExistsError(Error):
    """A dataset or index of that name exists. Attributes: ``dataset``, ``index``."""

    dataset: str | None = None
    index: str | None = None


class CorruptionError(Error):
    """A file failed a checksum or structure check. Attribute: ``path``."""

    path: str | None = None


class StorageIOError(Error, OSError):
    """An operating-system I/O error. Attribute: ``path``."""

    path: str | None = None


class LockedError(Error):
    """The database directory is open in another process (or another
    ``Database`` object of this one that was not closed). Attribute: ``path``."""

    path: str | None = None


class ClosedError(Error):
    """The database was closed, or the engine stopped accepting writes after a
    background failure."""


class SqlError(Error, ValueError):
    """A SQL statement could not be parsed, planned or run (storage errors
    inside SQL keep their own class, e.g. :class:`DuplicateKeyError`)."""


class InternalError(Error):
    """A bug in siltdb (a Rust panic caught at the boundary). Please report it."""


# Show the classes as `siltdb.X` (where users import them from).
for _cls in (
    Error,
    InvalidInputError,
    TooLargeError,
    ConfigError,
    DuplicateKeyError,
    ForeignKeyError,
    NotFoundError,
    AlreadyExistsError,
    CorruptionError,
    StorageIOError,
    LockedError,
    ClosedError,
    SqlError,
    InternalError,
):
    _cls.__module__ = "siltdb"
del _cls


class ConflictError(Error):
    """A transaction's commit found a record it read changed by another
    transaction. Nothing was applied: run the transaction again.

    Attributes: ``dataset`` and ``key`` (the key as text).
    """

    dataset: str | None = None
    key: str | None = None


class TransactionError(Error):
    """A transaction was used in a way its state does not allow (it has
    ended, or there is no savepoint of that name)."""
