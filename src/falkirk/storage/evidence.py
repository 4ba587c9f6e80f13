"""A storage root whose metadata is gone: refused, never taken for a new root.

The metadata database is what recovery trusts. If it is missing, or empty, a driver
would see a root where nothing was committed and start from scratch: it would sweep
the old checkpoints and logs, read only the input still there, and overwrite output
epochs with results that start again from zero. So before a driver creates the
database it looks for *evidence* that a pipeline committed in this root - files only
a commit could have referenced:

* checkpoint or log files (``checkpoints/``, ``logs/``);
* published copies of the metadata (``_meta/meta-*.sqlite``, a Hadoop-URI root);
* a write-ahead log (``meta.sqlite-wal``) that holds a committed epoch;
* the mark ``falkirk.committed`` the metadata store leaves beside the database at a
  root's first committed epoch (a root whose pipeline keeps no checkpoints or logs
  has nothing else to show).

A database file that holds no table (its header only: what is left when its
write-ahead log is lost before SQLite copied it in) counts as empty.

A lock file, empty folders or the write-ahead log of a run that never committed an
epoch are no evidence: such a root is new. With evidence, the start is refused with a
:class:`~falkirk.storage.CorruptStorageError` that says what is missing and how to
recover; nothing in the root is changed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError
from falkirk.storage.filesystem import FileSystem
from falkirk.storage.schema import DB_NAME, read_only_uri

#: Left beside the metadata database at a root's first committed epoch.
COMMITTED_MARK = "falkirk.committed"

#: The areas of a root that hold only files a commit names (see runtime.garbage).
DATA_AREAS = ("checkpoints", "logs")
#: Bytes a write-ahead log holds once an epoch was committed (the progress row's name).
_COMMITTED_MARK = b"committed_epoch"
#: How many files of an area are looked at before it counts as evidence anyway.
_LOOK = 10_000


def _files_under(fs: FileSystem, directory: str) -> str | None:
    """The first file found under ``directory`` (depth first), if any."""
    pending, seen = [directory], 0
    while pending and seen < _LOOK:
        for path, is_dir in fs.children(pending.pop()):
            seen += 1
            if is_dir:
                pending.append(path)
            else:
                return path
    return None


def _wal_holds_commits(wal: Path) -> bool:
    tail = b""
    try:
        with wal.open("rb") as f:
            while chunk := f.read(1 << 20):
                if _COMMITTED_MARK in tail + chunk:
                    return True
                tail = chunk[-len(_COMMITTED_MARK) :]
    except OSError:
        return False
    return False


def committed_evidence(fs: FileSystem, root: str, meta_dir: Path | None) -> list[str]:
    """What in ``root`` (and, for a local root, its metadata directory
    ``meta_dir``) only a commit could have left: one line each (empty: none)."""
    found = []
    for area in DATA_AREAS:
        first = _files_under(fs, fs.join(root, area))
        if first is not None:
            found.append(f"{area}/ holds files (such as {first})")
    published = [p for p, is_dir in fs.children(fs.join(root, "_meta")) if not is_dir and p.rsplit("/", 1)[-1].startswith("meta-")]
    if published:
        found.append(f"_meta/ holds {len(published)} published copies of the metadata")
    if meta_dir is not None:
        wal = meta_dir / f"{DB_NAME}-wal"
        if wal.exists() and _wal_holds_commits(wal):
            found.append(f"{wal.name} holds committed epochs")
        if (meta_dir / COMMITTED_MARK).exists():
            found.append(f"{COMMITTED_MARK} says it committed epochs")
    return found


def _holds_no_table(db: Path) -> bool:
    """Whether the database at ``db`` is a header without any table (unreadable:
    False, so that opening it reports the damage)."""
    try:
        conn = sqlite3.connect(read_only_uri(db), uri=True)
        try:
            return bool(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def check_metadata(fs: FileSystem, root: str, meta_dir: Path, *, local: bool) -> None:
    """Refuse ``root`` if its metadata (``meta_dir``/meta.sqlite) is missing or empty
    while the root holds evidence of commits (see the module docstring). ``local``:
    the database lives in the root itself (for a Hadoop-URI root it is a working
    copy fetched from the published ones, checked by the caller after the fetch)."""
    db = meta_dir / DB_NAME
    try:
        size = db.stat().st_size
    except FileNotFoundError:
        size = None
    if size and not _holds_no_table(db):
        return
    evidence = committed_evidence(fs, root, meta_dir if local else None)
    if not evidence:
        return
    state = "missing" if size is None else "empty (0 bytes)" if not size else "empty (no table: its write-ahead log is gone)"
    where = str(db) if local else f"{root} (no published copy in {fs.join(root, '_meta')})"
    raise CorruptStorageError(
        f"the metadata of storage root {root} is {state}: {where}, although the root shows that a pipeline "
        f"committed here: {'; '.join(evidence)}. Without its metadata nothing in the root can be trusted, "
        "and starting afresh would overwrite committed output. Restore the metadata from a backup "
        f"(meta.sqlite, with its meta.sqlite-wal if there is one), or start with a new storage root. "
        "Nothing in the root was changed."
    )
