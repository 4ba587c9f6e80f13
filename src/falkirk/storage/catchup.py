"""Catching up from another driver's storage root (state movement).

A driver that joins a driver pair behind the other member copies that member's
committed state - a consistent snapshot of its metadata and every file the snapshot
names under its root - into its own root, and recovers from it as a restarted
driver would. The other member goes on meanwhile: its garbage collection may delete
a file of the snapshot before it is copied; the copy then starts again from a newer
snapshot (a bounded number of times). Every copied file is checked against the size
and SHA-256 the snapshot records, so a torn copy is never trusted. Files outside the
root (a sink's table) are shared by the pair and not copied.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError, StorageError
from falkirk.storage.filesystem import (
    FileSystem,
    LocalFileSystem,
    StoredFile,
    is_uri,
    safe_relative,
    verify_files,
    within,
)
from falkirk.storage.metastore import MetaStore
from falkirk.storage.published import PublishedMetadata
from falkirk.storage.schema import DB_NAME, read_only_uri

logger = logging.getLogger(__name__)

#: Snapshots tried before giving up (each fails only if the source collected a file
#: of the previous one while it was copied).
ATTEMPTS = 5


def snapshot_metadata(fs: FileSystem, root: str, into: Path) -> Path:
    """A consistent copy of ``root``'s committed metadata in the local folder
    ``into``: SQLite's online backup of a local root's database (also while its
    driver writes), or the newest published copy of a remote root's."""
    into.mkdir(parents=True, exist_ok=True)
    target = into / DB_NAME
    if is_uri(root):
        PublishedMetadata(fs, root, into, DB_NAME).fetch()
        if not target.exists():
            raise StorageError(f"{root} holds no published metadata: nothing to catch up from")
        return target
    source = Path(root) / DB_NAME
    if not source.exists():
        raise StorageError(f"{source} does not exist: nothing to catch up from")
    src = sqlite3.connect(read_only_uri(source), uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target


def copy_root(src_fs: FileSystem, src_root: str, dst_fs: FileSystem, dst_root: str, dst_meta: Path) -> int:
    """Copy ``src_root``'s committed state into ``dst_root`` (its metadata database
    into the local folder ``dst_meta``, replacing what was there); returns the
    epoch the copy has committed. Raises :class:`StorageError` if no snapshot could
    be copied whole in :data:`ATTEMPTS` tries."""
    src_root, dst_root = src_root.rstrip("/"), dst_root.rstrip("/")
    last: Exception | None = None
    for attempt in range(ATTEMPTS):
        with tempfile.TemporaryDirectory(prefix="falkirk-catchup-") as scratch:
            db = snapshot_metadata(src_fs, src_root, Path(scratch) / "meta")
            store = MetaStore(db.parent, fs=src_fs, root=src_root, read_only=True)
            try:
                committed = store.committed_epoch() or 0
                files = store.all_files()
            finally:
                store.close()
            try:
                copied = _copy_files(src_fs, src_root, dst_fs, dst_root, files, Path(scratch))
            except Exception as exc:
                last = exc
                logger.info("catch-up from %s: attempt %d found a file gone (%s); copying a newer snapshot", src_root, attempt + 1, exc)
                continue
            verify_files(copied, dst_fs)
            _install(db, dst_meta)
            logger.warning("caught up from %s: %d files, committed epoch %d", src_root, len(copied), committed)
            return committed
    raise StorageError(f"could not copy a whole snapshot of {src_root} in {ATTEMPTS} attempts: {last}")


def _copy_files(
    src_fs: FileSystem, src_root: str, dst_fs: FileSystem, dst_root: str, files: list[StoredFile], scratch: Path
) -> list[StoredFile]:
    copied: list[StoredFile] = []
    for f in files:
        if not f.path.startswith(src_root + "/"):
            continue  # a sink's table: shared by the pair
        rel = f.path[len(src_root) + 1 :]
        if not safe_relative(rel) or not within(src_fs, src_root, f.path):
            raise CorruptStorageError(
                f"the metadata of {src_root} names {f.path}, outside that root: it is not copied (nothing is read "
                "or written outside the roots of a catch-up)"
            )
        target = dst_fs.join(dst_root, rel)
        if dst_fs.size(target) == f.size:
            try:
                verify_files([StoredFile(target, f.size, f.sha256)], dst_fs)
                copied.append(StoredFile(target, f.size, f.sha256))
                continue  # copied by an earlier attempt (files are never rewritten)
            except CorruptStorageError:
                pass
        local = scratch / uuid.uuid4().hex
        src_fs.download(f.path, str(local))
        if local.stat().st_size != f.size:
            raise StorageError(f"{f.path} changed size while copied")
        dst_fs.upload(str(local), target)
        local.unlink()
        copied.append(StoredFile(target, f.size, f.sha256))
    return copied


def _install(db: Path, dst_meta: Path) -> None:
    """Put the copied database in place of ``dst_meta``'s (durably)."""
    dst_meta.mkdir(parents=True, exist_ok=True)
    target = dst_meta / DB_NAME
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    staged = dst_meta / f".{DB_NAME}.catchup-{uuid.uuid4().hex[:8]}"
    shutil.copyfile(db, staged)
    LocalFileSystem().make_durable([str(staged)])
    staged.replace(target)
    LocalFileSystem().make_durable([str(target)])
