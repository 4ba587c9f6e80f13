"""Errors of the storage layer."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class StorageError(FalkirkError):
    """The storage root or its metadata cannot be used as asked."""


class StorageInUseError(StorageError):
    """Another live driver holds the storage root (fencing)."""


class CorruptStorageError(StorageError):
    """A committed file is missing or differs from what its commit recorded."""


class StorageFullError(StorageError):
    """A file system the pipeline writes to is full, or over its quota: the storage
    root, its metadata, a sink's table or Spark's scratch directory. The message
    names it and its mount point (one line; the original error is the
    ``__cause__``); nothing committed is lost, and once space is freed a restart
    recovers from the last commit (see :mod:`falkirk.storage.full`)."""
