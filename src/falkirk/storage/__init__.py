"""Storage: the metadata store, fencing and the storage-root layout.

Data files (Parquet logs and checkpoints) are written by Spark; this package commits
the metadata that makes them visible, atomically and only once they are durable.
"""

from __future__ import annotations

from falkirk.storage.exceptions import CorruptStorageError, StorageError, StorageInUseError
from falkirk.storage.lock import RootLock
from falkirk.storage.metastore import (
    CommitBatch,
    MetaStore,
    StoredCheckpoint,
    StoredFile,
    make_durable,
    verify_files,
)

__all__ = [
    "CommitBatch",
    "CorruptStorageError",
    "MetaStore",
    "RootLock",
    "StorageError",
    "StorageInUseError",
    "StoredCheckpoint",
    "StoredFile",
    "make_durable",
    "verify_files",
]
