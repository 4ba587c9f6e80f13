"""Checking every committed file of a storage root (``falkirk verify``).

Recovery checks each committed file before it uses it; this checks all of them at
once - every metadata row against its checksum, then logs, checkpoints and the output
files sinks committed against the sizes and SHA-256 their commits recorded, for a
pipeline that is running or stopped, on a local or remote root, without changing
anything.

It also reads what the root records of each sink (:class:`SinkRecord`): where the
sink writes (the ``target`` of the pipeline description) and the range of epochs
committed to it, which the root keeps however far it prunes its per-epoch records -
so that a sink's table can be checked for missing epochs, not only for damaged files
(:mod:`falkirk.ops.verify`, :mod:`falkirk.io.table_check`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from falkirk.storage.exceptions import CorruptStorageError
from falkirk.storage.filesystem import FileSystem, StoredFile, is_uri, verify_files
from falkirk.storage.metastore import MetaStore
from falkirk.storage.published import PublishedMetadata
from falkirk.storage.schema import DB_NAME


@dataclass(frozen=True)
class SinkRecord:
    """What a root records of one sink: where it writes (its description's
    ``target``, e.g. ``{"kind": "parquet", "path": ..., "visibility": ...}``; None
    if the description was written by a Falkirk before targets) and the first and
    last epoch committed to it (None: none is)."""

    name: str
    target: dict[str, Any] | None
    committed: tuple[int, int] | None


@dataclass
class Verdict:
    """What :func:`verify_root` found."""

    checked: int = 0
    bytes: int = 0
    #: Metadata rows checked against their checksums.
    rows: int = 0
    damaged: list[str] = field(default_factory=list)
    #: The root's sinks, by name (None: its metadata could not be read).
    sinks: dict[str, SinkRecord] | None = None
    #: The committed files :func:`check_files` checks (read by :func:`read_root`).
    files: list[StoredFile] = field(default_factory=list)


def verify_root(fs: FileSystem, root: str) -> Verdict:
    """Check every file the root's committed metadata names (see the module
    docstring); a remote root is read from its newest published metadata."""
    verdict = read_root(fs, root)
    check_files(fs, verdict)
    return verdict


def read_root(fs: FileSystem, root: str) -> Verdict:
    """Read the root's metadata (its rows checked against their checksums): the
    files it commits and its sinks, nothing checked yet; damaged metadata is
    recorded in :attr:`Verdict.damaged`, never raised."""
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
            verdict.files = store.all_files()
            verdict.sinks = sinks(store)
        except CorruptStorageError as exc:
            verdict.damaged.append(str(exc))
        finally:
            store.close()
    return verdict


def sinks(store: MetaStore) -> dict[str, SinkRecord]:
    """The sinks ``store`` records, by name (none if it records no description)."""
    description = store.description() or {}
    ranges = store.sink_ranges()
    return {
        name: SinkRecord(name, processor.get("target"), ranges.get(name))
        for name, processor in sorted(description.get("processors", {}).items())
        if processor.get("sink")
    }


def check_files(fs: FileSystem, verdict: Verdict) -> None:
    """Check the files :func:`read_root` found against their committed sizes and
    SHA-256, adding to ``verdict``."""
    for f in verdict.files:
        try:
            verify_files([f], fs)
        except CorruptStorageError as exc:
            verdict.damaged.append(str(exc))
        verdict.checked += 1
        verdict.bytes += f.size
