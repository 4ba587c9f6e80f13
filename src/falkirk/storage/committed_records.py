"""Reading a storage root's committed metadata back: checkpoints, source offsets,
sink commits, message logs, keyed-state files, quarantine records and every file they
name - each row checked against its CRC on the way (:class:`CorruptStorageError`
names the database and the row otherwise).

:class:`CommittedRecords` is the reading half of
:class:`~falkirk.storage.metastore.MetaStore`, which opens the database and commits to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from falkirk.recovery import Topology, checkpoint_from_json
from falkirk.storage.batch import QuarantineRecord, QuarantineUnit, StoredCheckpoint
from falkirk.storage.exceptions import CorruptStorageError, StorageError
from falkirk.storage.filesystem import StoredFile
from falkirk.storage.recorded_paths import RecordedPaths
from falkirk.storage.schema import _COLUMNS, NO_ITERATION, column_tick, row_crc
from falkirk.time.ticks import Tick


class CommittedRecords:
    """What a storage root's metadata database committed, read back (see the module)."""

    #: The database, where it is, how its file paths are recorded, and whether its
    #: tables predate the ``iteration`` column (set by MetaStore when it opens it).
    _db: sqlite3.Connection
    path: Path
    _paths: RecordedPaths
    _legacy: bool

    def _has_table(self, table: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None

    def _select(
        self, table: str, where: str = "1", params: Sequence[Any] = (), order: str = "rowid", *, legacy: bool | None = None
    ) -> list[dict[str, Any]]:
        """The rows of ``table`` matching ``where``, each checked against its CRC
        (:class:`CorruptStorageError` names the database and the row otherwise).
        ``legacy``: the table has no ``iteration`` column (schemas 2-3, read before
        or without the upgrade; by default, as the database was opened)."""
        columns = _COLUMNS[table]
        legacy = (self._legacy if legacy is None else legacy) and "iteration" in columns
        if legacy:
            columns = tuple(c for c in columns if c != "iteration")
            order = order.replace(", iteration", "")
        found = []
        query = f"SELECT {', '.join(columns)}, crc FROM {table} WHERE {where} ORDER BY {order}"  # constant names
        try:
            rows = self._db.execute(query, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptStorageError(f"metadata {self.path} is damaged ({exc}); it is not used") from exc
        for *values, crc in rows:
            if row_crc(values) != crc:
                raise CorruptStorageError(
                    f"metadata {self.path} is damaged: a row of {table} ({values[0]!r}, {values[1]!r}) does "
                    "not match its checksum; it is not used. Restore the storage root from a backup, or "
                    "start with a fresh one."
                )
            row = dict(zip(columns, values, strict=True))
            if legacy:
                row["iteration"] = NO_ITERATION
            found.append(row)
        return found

    def checkpoints(self, topology: Topology) -> dict[str, list[StoredCheckpoint]]:
        """Committed checkpoints per processor of ``topology``, in increasing order.
        Records of processors the topology lacks raise :class:`StorageError`: the
        pipeline must not change under a storage root."""
        result: dict[str, list[StoredCheckpoint]] = {p: [] for p in topology.processors}
        for row in self._select("checkpoints", order="committed_at, rowid"):
            processor = row["processor"]
            if processor not in result:
                raise StorageError(
                    f"{self.path} holds checkpoints of processor {processor!r}, which this "
                    f"pipeline does not have ({sorted(result)}); use the pipeline that wrote "
                    "them or a fresh storage root"
                )
            meta = checkpoint_from_json(topology, json.loads(row["record"]))
            result[processor].append(StoredCheckpoint(meta, tuple(self._paths.from_json(row["files"], "checkpoints"))))
        # Commit order is usually frontier order; sort by how many frontiers lie below
        # (a chain's order) so that out-of-order commits are listed correctly too.
        return {p: _chain_order(items) for p, items in result.items()}

    def offsets(self, source: str) -> dict[int, Any]:
        """Committed offsets of ``source`` per epoch still kept (None: the source had
        nothing new for that epoch)."""
        rows = self._select("source_offsets", "source = ?", (source,), "epoch")
        return {row["epoch"]: json.loads(row["offsets"]) for row in rows}

    def position(self, source: str) -> Any:
        """The latest non-empty offsets of ``source`` (None before its first input):
        where planning its next epoch starts."""
        rows = self._select("source_offsets", "source = ? AND offsets != 'null'", (source,), "epoch DESC LIMIT 1")
        return json.loads(rows[0]["offsets"]) if rows else None

    def sink_commits(self, sink: str) -> dict[int, tuple[StoredFile, ...]]:
        """Committed epochs of ``sink`` still kept, with their files."""
        rows = self._select("sink_commits", "sink = ?", (sink,), "epoch")
        return {row["epoch"]: tuple(self._paths.from_json(row["files"], "sink_commits")) for row in rows}

    def logs(self, edge: str) -> dict[Tick, tuple[StoredFile, ...]]:
        """Committed message logs of ``edge`` per tick of its sender, in order (an
        epoch, or ``(epoch, iteration)`` in a loop; verify the files before use)."""
        rows = self._select("message_logs", "edge = ?", (edge,), "epoch, iteration")
        return {column_tick(row["epoch"], row["iteration"]): tuple(self._paths.from_json(row["files"], "message_logs")) for row in rows}

    def log_epochs(self, edge: str) -> list[Tick]:
        """The ticks of ``edge`` with a committed log, in order."""
        return list(self.logs(edge))

    def state_files(self, processor: str) -> list[tuple[Tick, str, tuple[StoredFile, ...]]]:
        """Committed keyed-state checkpoints of ``processor``: (tick, kind, files),
        oldest first (verify the files before use)."""
        rows = self._select("state_files", "processor = ?", (processor,), "epoch, iteration")
        return [
            (column_tick(row["epoch"], row["iteration"]), row["kind"], tuple(self._paths.from_json(row["files"], "state_files")))
            for row in rows
        ]

    def quarantined(self) -> dict[tuple[str, int], QuarantineRecord]:
        """Every committed quarantine record, by (processor, epoch): never forgotten
        (its rows are the user's; a replay of an old epoch needs its identities)."""
        if not self._has_table("quarantine"):  # a root from before schema 7, read as it is
            return {}
        found = {}
        for row in self._select("quarantine", order="epoch, processor"):
            record = QuarantineRecord(
                row["processor"],
                row["epoch"],
                QuarantineUnit(row["unit"]),
                {int(identity): str(reason) for identity, reason in json.loads(row["identities"])},
                row["rows"],
                tuple(self._paths.from_json(row["files"], "quarantine")),
            )
            found[(record.processor, record.epoch)] = record
        return found

    def referenced_files(self) -> set[str]:
        """Every file some commit names: anything else under the root is garbage."""
        return {f.path for f in self.all_files()}

    def check_rows(self) -> int:
        """Read every row of every table, checking its CRC; returns how many there are
        (raises :class:`CorruptStorageError` at the first damaged one)."""
        tables = [t for t in _COLUMNS if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
        return sum(len(self._select(table)) for table in tables)

    def all_files(self) -> list[StoredFile]:
        """Every committed file the store still names (for ``falkirk verify``)."""
        found: list[StoredFile] = []
        for table in ("checkpoints", "sink_commits", "message_logs", "state_files", "quarantine"):
            if not self._has_table(table):
                continue
            for row in self._select(table):
                found.extend(self._paths.from_json(row["files"], table))
        return found


def _chain_order(items: list[StoredCheckpoint]) -> list[StoredCheckpoint]:
    def below(s: StoredCheckpoint) -> int:
        return sum(o.meta.frontier < s.meta.frontier for o in items)

    return sorted(items, key=below)
