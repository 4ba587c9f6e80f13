"""Errors of the storage layer."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class StorageError(FalkirkError):
    """The storage root or its metadata cannot be used as asked."""


class StorageInUseError(StorageError):
    """Another live driver holds the storage root (fencing)."""


class CorruptStorageError(StorageError):
    """A committed file is missing or differs from what its commit recorded."""
