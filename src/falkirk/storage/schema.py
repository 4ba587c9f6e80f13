"""The metadata database's schema: its tables, its version, and how ticks are stored.

Schema 4 keys message logs and state files by ``(epoch, iteration)``: an epoch
processor's records have iteration ``NO_ITERATION``, a loop processor's the iteration
of its tick ((e, ∞) as ``ALL_ITERATIONS``). Schema 5 lets a state file's kind be
``cec:T`` (a continuous eventual checkpoint's log entry, needing the entries from T
on). Schema 6 adds the ``root`` table (the root's identity: what names its writes
outside the root, see :mod:`falkirk.storage.identity`) and ``sink_ranges`` (the
epochs committed to each sink, kept however far the per-epoch records are pruned, so
that ``falkirk verify`` can tell a missing epoch). Schema 7 adds ``quarantine``: the
rows each processor set aside per epoch (identities, reasons, the quarantine table's
files), so that a replay sets aside the same rows. Schemas 2 to 6 are read as they are and upgraded by
:mod:`falkirk.storage.upgrade` when a driver opens them. Every row carries a CRC-32 of
its values (:func:`row_crc`).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from falkirk.time import INF
from falkirk.time.ticks import Tick

SCHEMA_VERSION = 7
#: Older schemas this version opens (and upgrades when it writes): 2 lacks ``pipeline``;
#: 2 and 3 key logs and state files by epoch alone (4 adds the loop iteration); 2 to 4
#: allow only ``base`` and ``delta`` state files (5 adds ``cec:T``); 2 to 5 lack ``root``
#: and ``sink_ranges``, 2 to 6 ``quarantine`` (created when a driver opens them; see upgrade.py).
_UPGRADABLE = (2, 3, 4, 5, 6)
#: The ``iteration`` column of a record of an epoch processor (its tick is an int).
NO_ITERATION = -1
#: The ``iteration`` column of a loop tick ``(e, INF)``: all of epoch e.
ALL_ITERATIONS = 1 << 62
DB_NAME = "meta.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    processor TEXT NOT NULL,
    frontier TEXT NOT NULL,
    record TEXT NOT NULL,
    files TEXT NOT NULL,
    committed_at REAL NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (processor, frontier)
);
CREATE TABLE IF NOT EXISTS source_offsets (
    source TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    offsets TEXT NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (source, epoch)
);
CREATE TABLE IF NOT EXISTS message_logs (
    edge TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    files TEXT NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (edge, epoch, iteration)
);
CREATE TABLE IF NOT EXISTS state_files (
    processor TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('base', 'delta') OR kind GLOB 'cec:[0-9]*'),
    files TEXT NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (processor, epoch, iteration)
);
CREATE TABLE IF NOT EXISTS progress (
    name TEXT NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pipeline (
    name TEXT NOT NULL PRIMARY KEY,
    description TEXT NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS root (
    name TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sink_ranges (
    sink TEXT NOT NULL PRIMARY KEY,
    first INTEGER NOT NULL,
    last INTEGER NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sink_commits (
    sink TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    files TEXT NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (sink, epoch)
);
CREATE TABLE IF NOT EXISTS quarantine (
    processor TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    unit TEXT NOT NULL CHECK (unit IN ('row', 'key', 'file')),
    identities TEXT NOT NULL,
    rows INTEGER NOT NULL,
    files TEXT NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (processor, epoch)
);
"""

#: Every table's columns, in order (the last, ``crc``, checks the others).
_COLUMNS = {
    "checkpoints": ("processor", "frontier", "record", "files", "committed_at"),
    "source_offsets": ("source", "epoch", "offsets"),
    "message_logs": ("edge", "epoch", "iteration", "files"),
    "state_files": ("processor", "epoch", "iteration", "kind", "files"),
    "sink_commits": ("sink", "epoch", "files"),
    "pipeline": ("name", "description"),
    "progress": ("name", "value"),
    "root": ("name", "value"),
    "sink_ranges": ("sink", "first", "last"),
    "quarantine": ("processor", "epoch", "unit", "identities", "rows", "files"),
}


def tick_columns(t: Tick) -> tuple[int, int]:
    """A tick as its ``(epoch, iteration)`` columns."""
    if not isinstance(t, Tick):
        raise TypeError(f"the metadata records ticks (falkirk.time.ticks.Tick), got {t!r}")
    if t.step is None:
        return t.epoch, NO_ITERATION
    return t.epoch, ALL_ITERATIONS if t.step == INF else int(t.step)


def column_tick(epoch: int, iteration: int) -> Tick:
    """The tick of ``(epoch, iteration)`` columns."""
    if iteration == NO_ITERATION:
        return Tick(epoch)
    return Tick(epoch, INF if iteration == ALL_ITERATIONS else iteration)


def read_only_uri(path: str | os.PathLike[str]) -> str:
    """The SQLite URI that opens the database at ``path`` read-only, its path quoted
    (a ``?`` or ``#`` in a directory's name is part of the path, not the URI's query)."""
    return f"file://{quote(os.fspath(Path(path).absolute()))}?mode=ro"  # an empty authority: "//x" is a path


def row_crc(values: Sequence[Any]) -> int:
    """The CRC-32 every row carries: of its values, as JSON."""
    return zlib.crc32(json.dumps(list(values)).encode())


def with_crc(*values: Any) -> tuple[Any, ...]:
    """``values`` and their CRC, as a table row."""
    return (*values, row_crc(values))
