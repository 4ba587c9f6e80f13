"""Checking every committed file of a storage root (``falkirk verify``).

Recovery checks each committed file before it uses it; this checks all of them at
once - every metadata row against its checksum, then logs, checkpoints and the output
files sinks committed against the sizes and SHA-256 their commits recorded, for a pipeline that is running or stopped, on a
local or remote root, without changing anything.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError
from falkirk.storage.filesystem import FileSystem, is_uri, verify_files
from falkirk.storage.metastore import MetaStore
from falkirk.storage.published import PublishedMetadata
from falkirk.storage.schema import DB_NAME


@dataclass
class Verdict:
    """What :func:`verify_root` found."""

    checked: int = 0
    bytes: int = 0
    #: Metadata rows checked against their checksums.
    rows: int = 0
    damaged: list[str] = field(default_factory=list)


def verify_root(fs: FileSystem, root: str) -> Verdict:
    """Check every file the root's committed metadata names (see the module
    docstring); a remote root is read from its newest published metadata."""
    verdict = Verdict()
    with tempfile.TemporaryDirectory(prefix="falkirk-verify-") as work:
        directory = root
        if is_uri(root):
            PublishedMetadata(fs, root, work, DB_NAME).fetch()
            directory = work
        try:
            store = MetaStore(Path(directory), fs=fs, read_only=True, root=root)
        except CorruptStorageError as exc:
            verdict.damaged.append(str(exc))
            return verdict
        try:
            verdict.rows = store.check_rows()
            files = store.all_files()
        except CorruptStorageError as exc:
            verdict.damaged.append(str(exc))
            return verdict
        finally:
            store.close()
    for f in files:
        try:
            verify_files([f], fs)
        except CorruptStorageError as exc:
            verdict.damaged.append(str(exc))
        verdict.checked += 1
        verdict.bytes += f.size
    return verdict
