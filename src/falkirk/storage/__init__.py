"""Storage: the metadata store, fencing and the storage-root layout.

Data files (Parquet logs and checkpoints) are written by Spark; this package commits
the metadata that makes them visible, atomically and only once they are durable.
"""

from __future__ import annotations

from falkirk.storage.batch import (
    CommitBatch,
    Forget,
    QuarantineRecord,
    QuarantineUnit,
    StoredCheckpoint,
)
from falkirk.storage.exceptions import (
    CorruptStorageError,
    StorageError,
    StorageFullError,
    StorageInUseError,
)
from falkirk.storage.filesystem import (
    FileSystem,
    HadoopFileSystem,
    LocalFileSystem,
    StoredFile,
    filesystem_for,
    verify_files,
)
from falkirk.storage.lock import RootLock
from falkirk.storage.metastore import MetaStore, make_durable

__all__ = [
    "CommitBatch",
    "CorruptStorageError",
    "FileSystem",
    "Forget",
    "HadoopFileSystem",
    "LocalFileSystem",
    "MetaStore",
    "QuarantineRecord",
    "QuarantineUnit",
    "RootLock",
    "StorageError",
    "StorageFullError",
    "StorageInUseError",
    "StoredCheckpoint",
    "StoredFile",
    "filesystem_for",
    "make_durable",
    "verify_files",
]
