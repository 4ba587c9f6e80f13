"""Metadata of a storage root on a remote (Hadoop) filesystem.

SQLite needs a local file with POSIX locks, which HDFS or S3 do not offer. For a
remote root the database therefore lives in a local working directory, and every
committed transaction is *published* to the root as a numbered, immutable copy
``<root>/_meta/meta-<seq>.sqlite``:

1. copy the database (SQLite online backup) to a local temporary file;
2. check that no copy newer than ours was published meanwhile (a second driver
   on the same root is refused with :class:`StorageInUseError`);
3. upload it under a temporary name and rename it to the next sequence number;
4. delete copies older than the previous one.

A commit counts once step 3 has renamed it. On start the newest published copy is
downloaded over the working copy, so whatever the local disk holds (a commit that
was never published, or nothing at all on a fresh machine) the root is the truth,
and a driver on any machine can recover it. A copy that fails SQLite's integrity
check is reported, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError, StorageInUseError
from falkirk.storage.filesystem import FileSystem

META_DIR = "_meta"
_NAME = re.compile(r"meta-(\d{12})\.sqlite$")


def default_metadata_dir(root: str) -> Path:
    """Where a driver works on the metadata of remote ``root`` unless told otherwise:
    ``$XDG_CACHE_HOME/falkirk/<hash of the URI>`` (``~/.cache`` by default). Only a
    cache: the published copies in the root are the truth."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "falkirk" / hashlib.sha256(root.encode()).hexdigest()[:16]


class PublishedMetadata:
    """The published copies of one remote root's metadata (see the module docstring)."""

    def __init__(
        self,
        fs: FileSystem,
        root: str,
        local_dir: str | Path,
        db_name: str,
        *,
        before_publish: Callable[[], None] = lambda: None,
    ) -> None:
        """``before_publish`` runs between upload and rename (a crash point for tests)."""
        self.fs = fs
        self.before_publish = before_publish
        self.directory = fs.join(root, META_DIR)
        self.local_dir = Path(local_dir)
        self.db_name = db_name
        self.seq = 0

    def _published(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for path, is_dir in self.fs.children(self.directory):
            match = _NAME.search(path)
            if match and not is_dir:
                found[int(match.group(1))] = path
        return found

    def fetch(self) -> None:
        """Replace the local working copy by the newest published copy (or remove
        it when nothing was published yet)."""
        self.local_dir.mkdir(parents=True, exist_ok=True)
        local = self.local_dir / self.db_name
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{local}{suffix}").unlink(missing_ok=True)
        for path, _ in self.fs.children(self.directory):
            if Path(path).name.startswith("_tmp-"):  # an upload a crash interrupted
                self.fs.delete(path)
        published = self._published()
        self.seq = max(published, default=0)
        if not self.seq:
            return
        source = published[self.seq]
        self.fs.download(source, str(local))
        expected = self.fs.size(source)
        if local.stat().st_size != expected:
            raise CorruptStorageError(f"downloading {source} gave {local.stat().st_size} bytes, {expected} expected")
        try:
            with sqlite3.connect(local) as db:
                verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            raise CorruptStorageError(f"published metadata {source} is damaged ({verdict}); it is not used")

    def publish(self, db: sqlite3.Connection) -> None:
        """Publish the committed state of ``db`` as the next copy (steps 1-4)."""
        # Step 1
        snapshot = self.local_dir / f"publish-{uuid.uuid4().hex[:12]}.sqlite"
        target = sqlite3.connect(snapshot)
        try:
            db.backup(target)
        finally:
            target.close()
        try:
            # Step 2
            newer = [s for s in self._published() if s > self.seq]
            if newer:
                raise StorageInUseError(
                    f"{self.directory} holds metadata #{max(newer)} that this driver did not "
                    f"write (it is at #{self.seq}): another driver uses this storage root. "
                    "Stop one of them; the survivor must restart to recover."
                )
            # Step 3
            tmp = self.fs.join(self.directory, f"_tmp-{uuid.uuid4().hex[:12]}")
            self.fs.upload(str(snapshot), tmp)
            self.before_publish()
            self.fs.replace(tmp, self.fs.join(self.directory, f"meta-{self.seq + 1:012d}.sqlite"))
            self.seq += 1
        finally:
            snapshot.unlink(missing_ok=True)
        # Step 4
        for seq, path in self._published().items():
            if seq < self.seq - 1:
                self.fs.delete(path)
