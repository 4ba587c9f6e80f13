"""The storage root a run writes to: where its state and metadata live, and holding it.

A root is a local directory, whose metadata database lives in the root itself, or any
Hadoop filesystem URI Spark can write (``hdfs://...``, ``s3a://...``, ``file:///...``),
whose database is worked on in a local ``metadata_dir`` and published to the root after
every commit (:mod:`falkirk.storage.published`).

Guarantees: while :meth:`StorageRoot.held` is entered, no other engine on this machine
holds the root's metadata directory (or, for a ``file:`` URI, the directory it
names), and on a URI root no driver elsewhere holds the root's lease; a driver whose
lease was taken can never commit again. :meth:`StorageRoot.open` refuses a root
spelled differently from how it was first used and a root whose metadata is damaged
or missing, before anything is read or written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.checks import check_spelling, local_root
from falkirk.storage import MetaStore, RootLock
from falkirk.storage.evidence import check_metadata
from falkirk.storage.exceptions import StorageError
from falkirk.storage.filesystem import FileSystem, filesystem_for, is_uri
from falkirk.storage.published import PublishedMetadata, default_metadata_dir
from falkirk.storage.schema import DB_NAME


def check_writable(storage: str | Path, metadata_dir: str | Path | None = None) -> None:
    """Refuse, before Spark starts, a local storage root (and a URI root's local
    ``metadata_dir``) this process cannot create or write in - a read-only mount, a
    directory of another user, a path under a regular file - naming it and why. A root
    on another filesystem (``hdfs://``, ``s3a://``) is checked when the run opens it."""
    places = [storage] if not is_uri(str(storage)) else []
    if is_uri(str(storage)):
        places.append(metadata_dir or default_metadata_dir(str(storage)))
    for place in places:
        path = Path(os.path.expanduser(str(place))).absolute()
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path, prefix=".falkirk-write-check-"):
                pass
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise StorageError(
                f"storage root {str(path)!r} cannot be written ({why}): a run keeps its state and metadata there. "
                "Give Engine a directory this user can create and write (or make this one writable), and "
                "run again"
            ) from exc


class StorageRoot:
    """Where a run keeps its state and metadata (see the module).

    ``metadata_dir`` is where a URI root's database is worked on (by default a
    directory under ``~/.cache/falkirk`` derived from the URI); it is ignored for a
    local root. ``lease_timeout``: on a URI root, a driver on another host whose
    heartbeat has not moved for this many seconds is taken to be dead (a dead
    driver on the same host is seen at once)."""

    def __init__(
        self, storage: str | Path, spark: SparkSession, *, metadata_dir: str | Path | None = None, lease_timeout: float = 10.0
    ) -> None:
        self.fs: FileSystem
        self.fs, self.root = filesystem_for(storage, spark)
        #: The published copy of a URI root's metadata (None for a local root).
        self.published: PublishedMetadata | None = None
        if is_uri(self.root):
            self.meta_dir = Path(metadata_dir or default_metadata_dir(self.root)).absolute()
            self.published = PublishedMetadata(
                self.fs,
                self.root,
                self.meta_dir,
                DB_NAME,
                before_publish=lambda: crash_point(CrashPoint.META_UPLOADED),
                lease_interval=lease_timeout / 5,
                lease_timeout=lease_timeout,
            )
        else:
            self.meta_dir = Path(self.root)

    @contextmanager
    def held(self, *, wait: bool) -> Iterator[None]:
        """Hold the root while the block runs: the metadata directory's lock, for a
        ``file:`` URI root the lock of the directory it names too (the same root
        spelled as a path is held by it), and a URI root's lease. ``wait``: wait for
        a holder to let go (a standby) rather than raise
        :class:`~falkirk.storage.StorageInUseError`."""
        locks = [RootLock(d) for d in dict.fromkeys([self.meta_dir, *filter(None, [local_root(self.root)])])]
        held: list[RootLock] = []
        try:
            for lock in locks:
                lock.acquire(wait=wait)
                held.append(lock)
            if self.published is not None:
                self.published.acquire(wait=wait)
            try:
                yield
            finally:
                if self.published is not None:
                    self.published.release()
        finally:
            for lock in held:
                lock.release()

    def check(self) -> None:
        """Before the metadata is opened (the root held): refuse a root used before
        under the other spelling, fetch a URI root's published metadata, and refuse
        metadata that is damaged or missing while the root holds committed files."""
        check_spelling(self.root, uri_root=self.published is not None)
        if self.published is not None:
            self.published.fetch()
        check_metadata(self.fs, self.root, self.meta_dir, local=self.published is None)

    def open(self) -> MetaStore:
        """The root's metadata store (every commit published, on a URI root); on a
        URI root the root is claimed for this run before anything is deleted."""
        store = MetaStore(
            self.meta_dir,
            fs=self.fs,
            on_commit=self.published.publish if self.published is not None else None,
            root=self.root,
        )
        if self.published is not None:  # before anything is deleted: see published.py
            try:
                self.published.claim(store.connection)
            except BaseException:
                store.close()
                raise
        return store
