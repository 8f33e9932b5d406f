"""What mmapsync refuses, each a :class:`~conveyor.errors.ConveyorError`."""

from __future__ import annotations

from conveyor.errors import ConveyorError, CorruptStorage, InvalidRequest, StorageError


class NativeBuildError(ConveyorError):
    """The atomics helper could not be compiled or loaded (no C compiler, no Python headers)."""


class DataSetNotFound(StorageError):
    """No data set at this prefix: its state or a data file is missing."""

    status = 404


class NothingPublished(StorageError):
    """The data set exists but its writer has not published a first version yet."""

    status = 404


class ForeignFile(CorruptStorage):
    """A file at the data set's path is not an mmapsync file (wrong magic, layout or size)."""


class TruncatedFile(CorruptStorage):
    """A file is shorter than the state says it must be."""


class ReadersStillActive(ConveyorError):
    """A live reader still holds the file the writer needs after the grace period; nothing was published."""

    status = 503


class TooManyReaders(ConveyorError):
    """Every reader slot in the state file is held by a live reader."""

    status = 503


class DuplicateKey(InvalidRequest):
    """A FeatureStore publication named the same key twice; nothing was published."""
