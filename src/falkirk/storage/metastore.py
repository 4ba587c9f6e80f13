"""The metadata store: what is committed, in one SQLite file under the storage root.

Everything that recovery trusts lives here: checkpoint metadata Ξ(p, f) with the
files holding its state and logs, source offsets per epoch, and sink commits per
epoch. The protocol (DESIGN.md, failure model):

1. write data files (Parquet) under fresh, unique names;
2. make them durable (:func:`make_durable`) and record their sizes and SHA-256;
3. commit the metadata naming them in **one** SQLite transaction (:meth:`MetaStore.commit`).

A crash before step 3 leaves files that no commit names: invisible, and collected
later. A crash during step 3 leaves no trace (SQLite rolls the transaction back).
Before a committed file is used it is checked against its recorded size and
checksum (:func:`verify_files`), so a partial or damaged file - also one with a
flipped bit - is detected, never trusted (:class:`CorruptStorageError`).
Records are JSON, never pickles, and every row carries a CRC-32 of its values that is
checked whenever it is read, so a flipped bit in the database is reported, not used
(SQLite's own integrity check sees only its structure). Paths of files under the
storage root are stored relative to it: a copied or restored root is whole by itself.

The store stays small however long a pipeline runs: records below the monitor's
low-watermarks are forgotten (:class:`Forget`) in the same transaction as a later
commit, source offsets included (a source needs only its latest position).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from falkirk.recovery import checkpoint_to_json
from falkirk.storage.batch import (
    CommitBatch,
    Forget,
)
from falkirk.storage.committed_records import CommittedRecords
from falkirk.storage.evidence import COMMITTED_MARK
from falkirk.storage.exceptions import CorruptStorageError, StorageError
from falkirk.storage.filesystem import (
    FileSystem,
    LocalFileSystem,
    StoredFile,
    is_uri,
)
from falkirk.storage.full import Place, storage_full_error
from falkirk.storage.permissions import private_dir, restrict
from falkirk.storage.recorded_paths import RecordedPaths
from falkirk.storage.schema import (
    _SCHEMA,
    _UPGRADABLE,
    DB_NAME,
    SCHEMA_VERSION,
    read_only_uri,
    row_crc,
    tick_columns,
    with_crc,
)
from falkirk.storage.upgrade import backfill_sink_ranges, has_column, upgrade
from falkirk.time import frontier_to_json


def make_durable(paths: Iterable[str | os.PathLike[str]]) -> list[StoredFile]:
    """fsync local files (and their directories) and return them with their sizes and
    checksums. Raises :class:`StorageError` if a file is missing: it cannot be committed."""
    return LocalFileSystem().make_durable(str(p) for p in paths)


class MetaStore(CommittedRecords):
    """Committed metadata of one storage root (see the module docstring); what it
    reads back: :class:`~falkirk.storage.committed_records.CommittedRecords`."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fs: FileSystem | None = None,
        on_commit: Callable[[sqlite3.Connection], None] | None = None,
        read_only: bool = False,
        root: str | None = None,
    ) -> None:
        """Open (or create) the database in the local ``directory``. ``fs`` is the file
        system of the data files it names (to verify them); ``on_commit`` runs after
        every committed transaction (it publishes the database of a remote root, see
        :mod:`falkirk.storage.published`): a commit counts once it returns.
        ``read_only`` opens an existing database without writing to it (also while a
        driver runs on it). Files under ``root`` (the storage root, spelled as ``fs``
        lists it; by default ``directory``, as for a local root) are recorded
        relative to it. A damaged database raises :class:`CorruptStorageError`
        naming it; a full file system (here and at every write)
        :class:`~falkirk.storage.StorageFullError`."""
        self.fs: FileSystem = fs or LocalFileSystem()
        self._on_commit = on_commit
        self.root = (root or str(Path(directory).absolute())).rstrip("/")
        self.path = Path(directory) / DB_NAME
        #: How file paths are recorded: relative to the root, and never read outside it.
        self._paths = RecordedPaths(self.root, self.fs, self.path)
        self._marked = False
        try:
            with self._full_disk():
                self._open(read_only)
        except sqlite3.DatabaseError as exc:  # not OperationalError of a full disk: raised above
            raise CorruptStorageError(
                f"metadata {self.path} is damaged ({exc}); it is not used. Restore the storage root "
                "from a backup, or start with a fresh one."
            ) from exc

    def _open(self, read_only: bool) -> None:
        if read_only:
            if not self.path.exists():
                raise StorageError(f"{self.path} does not exist: no pipeline has run on this storage root")
            self._db = sqlite3.connect(read_only_uri(self.path), uri=True, isolation_level=None)
            self._check_version()
            self._check_structure()
            self._legacy = not has_column(self._db, "message_logs", "iteration")
            return
        private_dir(self.path.parent)
        fresh = not self.path.exists()
        self._db = sqlite3.connect(self.path, isolation_level=None)
        if fresh:
            restrict(self.path)  # its -wal and -shm take its mode
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        # Keep the write-ahead log small: a checkpoint every ~100 pages, and the log
        # file cut back to 256 KB after it (SQLite keeps it at its largest otherwise).
        self._db.execute("PRAGMA wal_autocheckpoint=100")
        self._db.execute("PRAGMA journal_size_limit=262144")
        version = self._check_version()
        self._check_structure()
        self._legacy = False
        upgrade(self._db, lambda table, legacy: self._select(table, legacy=legacy))
        self._db.executescript(_SCHEMA)
        if version != SCHEMA_VERSION and not fresh:
            backfill_sink_ranges(self._db, lambda table: self._select(table, legacy=False))
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        if fresh:
            LocalFileSystem().make_durable([str(self.path)])

    def _check_structure(self) -> None:
        verdict = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise sqlite3.DatabaseError(verdict)

    def _check_version(self) -> int:
        version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION, *_UPGRADABLE):
            self._db.close()
            raise StorageError(
                f"{self.path} has metadata schema {version}; this Falkirk reads schema "
                f"{SCHEMA_VERSION}. Use the Falkirk version that wrote it, or a fresh storage root."
            )
        return version

    @property
    def connection(self) -> sqlite3.Connection:
        """The database connection (to publish it: :mod:`falkirk.storage.published`)."""
        return self._db

    def _committed(self) -> None:
        if self._on_commit is not None:
            self._on_commit(self._db)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _full_disk(self) -> Iterator[None]:
        """SQLite's ``database or disk is full`` (or ENOSPC) while the block writes,
        as a :class:`~falkirk.storage.StorageFullError` naming the database (the
        block's transaction has rolled back: nothing of it is committed)."""
        try:
            yield
        except (sqlite3.OperationalError, OSError) as exc:
            move = "move the storage root to a larger file system"
            if is_uri(self.root):
                move = "give the engine a metadata_dir on a larger file system"
            full = storage_full_error(exc, [Place("the metadata database", str(self.path), move)])
            if full is None:
                raise
            raise full from exc

    # -- writing ----------------------------------------------------------------------

    def commit(self, batch: CommitBatch) -> list[StoredFile]:
        """Record ``batch`` atomically: all of it is visible afterwards, or none.
        Returns the files of the records ``batch.forget`` forgot (delete them now)."""
        now = time.time()
        rows_ckpt = [
            with_crc(
                meta.processor,
                json.dumps(frontier_to_json(meta.frontier)),
                json.dumps(checkpoint_to_json(meta)),
                self._paths.to_json(files),
                now,
            )
            for meta, files in batch.checkpoints
        ]
        rows_off = [with_crc(s, e, json.dumps(o)) for s, e, o in batch.offsets]
        rows_sink = [with_crc(s, e, self._paths.to_json(f)) for s, e, f in batch.sink_commits]
        rows_logs = [with_crc(edge, *tick_columns(t), self._paths.to_json(f)) for edge, t, f in batch.logs]
        rows_state = [with_crc(p, *tick_columns(t), kind, self._paths.to_json(f)) for p, t, kind, f in batch.state]
        rows_quarantine = [
            with_crc(q.processor, q.epoch, q.unit.value, json.dumps(sorted(q.reasons.items())), q.rows, self._paths.to_json(q.files))
            for q in batch.quarantine
        ]
        with self._full_disk():  # outside: the transaction is rolled back first
            try:
                self._db.execute("BEGIN IMMEDIATE")
                forgotten = self._forget(batch.forget)
                self._db.executemany("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)", rows_ckpt)
                # Offsets of a replayed epoch are the ones recorded the first time: same input.
                self._db.executemany("INSERT OR IGNORE INTO source_offsets VALUES (?, ?, ?, ?)", rows_off)
                self._add_to_offsets(batch.offsets_added)
                self._db.executemany("INSERT OR REPLACE INTO sink_commits VALUES (?, ?, ?, ?)", rows_sink)
                self._extend_sink_ranges([(s, e) for s, e, _ in batch.sink_commits])
                self._db.executemany("INSERT INTO message_logs VALUES (?, ?, ?, ?, ?)", rows_logs)
                self._db.executemany("INSERT INTO state_files VALUES (?, ?, ?, ?, ?, ?)", rows_state)
                # A replay of the epoch quarantines the same rows: its record replaces the first.
                self._db.executemany("INSERT OR REPLACE INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?)", rows_quarantine)
                if batch.epoch is not None:
                    self._db.execute("INSERT OR REPLACE INTO progress VALUES (?, ?, ?)", with_crc("committed_epoch", batch.epoch))
                if batch.end_of_input is not None:
                    self._db.execute("INSERT OR IGNORE INTO progress VALUES (?, ?, ?)", with_crc("end_of_input", batch.end_of_input))
                if batch.description is not None:
                    self._replace_description(*batch.description)
                self._db.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(
                    f"commit refused: {exc}; the same checkpoint, offset or sink epoch was "
                    "already committed (a replay must skip committed work)"
                ) from exc
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        self._committed()
        if batch.epoch is not None and not self._marked:
            self._mark_committed()
        return forgotten

    def _add_to_offsets(self, added: Sequence[tuple[str, int, dict[str, Any]]]) -> None:
        """Add keys to committed offsets (inside a commit's transaction). A row
        whose CRC does not match is left as it is, for the reader to report."""
        for source, epoch, keys in added:
            row = self._db.execute("SELECT offsets, crc FROM source_offsets WHERE source = ? AND epoch = ?", (source, epoch)).fetchone()
            if row is None or row[0] == "null" or row_crc((source, epoch, row[0])) != row[1]:
                continue
            offsets = json.dumps({**json.loads(row[0]), **keys})
            self._db.execute(
                "UPDATE source_offsets SET offsets = ?, crc = ? WHERE source = ? AND epoch = ?",
                (offsets, row_crc((source, epoch, offsets)), source, epoch),
            )

    def _mark_committed(self) -> None:
        """Leave :data:`~falkirk.storage.evidence.COMMITTED_MARK` beside the database
        (once): a root that lost its database is then refused, not started afresh,
        even when it holds no checkpoint or log (:mod:`falkirk.storage.evidence`)."""
        mark = self.path.parent / COMMITTED_MARK
        if not mark.exists():
            with self._full_disk():
                mark.write_text("a pipeline committed epochs in this storage root; its metadata is meta.sqlite\n")
                LocalFileSystem().make_durable([str(mark)])
        self._marked = True

    def _extend_sink_ranges(self, commits: Sequence[tuple[str, int]]) -> None:
        """Widen each sink's committed range by the epochs just committed (in the
        caller's transaction)."""
        ranges = self.sink_ranges()
        for sink, epoch in commits:
            first, last = ranges.get(sink, (epoch, epoch))
            ranges[sink] = (min(first, epoch), max(last, epoch))
            self._db.execute("INSERT OR REPLACE INTO sink_ranges VALUES (?, ?, ?, ?)", with_crc(sink, *ranges[sink]))

    def _cut_sink_range(self, sink: str, epoch: int) -> None:
        """End ``sink``'s committed range at ``epoch`` (a rollback took the later ones
        back; in the caller's transaction)."""
        found = self.sink_ranges().get(sink)
        if found is None or found[1] <= epoch:
            return
        if epoch < found[0]:
            self._db.execute("DELETE FROM sink_ranges WHERE sink = ?", (sink,))
        else:
            self._db.execute("INSERT OR REPLACE INTO sink_ranges VALUES (?, ?, ?, ?)", with_crc(sink, found[0], epoch))

    def sink_ranges(self) -> dict[str, tuple[int, int]]:
        """Per sink, the first and last epoch committed to it (kept however far its
        per-epoch records are pruned; a rollback ends the range where it rolled
        back). A root written by a Falkirk before schema 6 knows the range from the
        per-epoch records it still had when it was upgraded."""
        if not self._has_table("sink_ranges"):
            return {}
        return {row["sink"]: (int(row["first"]), int(row["last"])) for row in self._select("sink_ranges", order="sink")}

    # -- the root's own facts (see falkirk.storage.identity) ----------------------------

    def fact(self, name: str) -> str | None:
        """A fact about the root recorded under ``name`` (None: not recorded)."""
        if not self._has_table("root"):
            return None
        rows = self._select("root", "name = ?", (name,))
        return str(rows[0]["value"]) if rows else None

    def record_fact(self, name: str, value: str) -> None:
        """Record (or replace) a fact about the root, durably, in its own transaction."""
        with self._full_disk():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO root VALUES (?, ?, ?)", with_crc(name, value))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        self._committed()

    def has_commits(self, planned: bool = True) -> bool:
        """Whether anything was ever committed here (an epoch, a checkpoint, a sink's
        epoch, an offset): a root with nothing committed is new. ``planned=False``
        leaves out the sources' planned offsets: a root that planned epochs but
        committed none holds no state and no output."""
        tables = ["progress", "checkpoints", "sink_commits", "sink_ranges", "state_files", "message_logs"]
        return any(
            self._has_table(t) and self._db.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None  # constant names
            for t in tables + (["source_offsets"] if planned else [])
        )

    def describe(self, name: str, description: dict[str, Any]) -> None:
        """Record the pipeline's description (its processors, policies and edges, as
        JSON) so that tools read a storage root without the pipeline's code
        (``falkirk status``). Replaces an earlier description of ``name``."""
        with self._full_disk():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._replace_description(name, description)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLite rolls back itself after some errors (a full disk)
                    self._db.execute("ROLLBACK")
                raise
        self._committed()

    def _replace_description(self, name: str, description: dict[str, Any]) -> None:
        """(Inside a transaction.)"""
        self._db.execute("DELETE FROM pipeline")
        self._db.execute("INSERT INTO pipeline VALUES (?, ?, ?)", with_crc(name, json.dumps(description, sort_keys=True)))

    def description(self) -> dict[str, Any] | None:
        """The description :meth:`describe` recorded (None: none was, e.g. a root
        written by an older Falkirk)."""
        try:
            rows = self._select("pipeline")
        except CorruptStorageError:
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'pipeline'").fetchone():
                return None  # schema 2, opened read-only
            raise
        return json.loads(rows[0]["description"]) if rows else None

    def committed_epoch(self) -> int | None:
        """The epoch of the latest commit (None: none yet, or a root written by an
        older Falkirk)."""
        if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'progress'").fetchone():
            return None  # schema 2, opened read-only
        rows = self._select("progress", "name = 'committed_epoch'")
        return int(rows[0]["value"]) if rows else None

    def end_of_input(self) -> int | None:
        """The epoch that ended the input (see :attr:`CommitBatch.end_of_input`)."""
        if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'progress'").fetchone():
            return None
        rows = self._select("progress", "name = 'end_of_input'")
        return int(rows[0]["value"]) if rows else None

    def forget(self, forget: Forget) -> list[StoredFile]:
        """Forget records in one transaction of their own (a rollback's undoing);
        returns the log and checkpoint files they named, to be deleted after."""
        return self.commit(CommitBatch(forget=forget))

    def _forget(self, forget: Forget) -> list[StoredFile]:
        files: list[StoredFile] = []
        if forget.everything:
            for table in ("message_logs", "state_files", "checkpoints"):
                for row in self._select(table, "1 = 1", ()):
                    files.extend(self._paths.from_json(row["files"], table))
                self._db.execute(f"DELETE FROM {table}")  # constant names
        for table, key_cols, keys in (
            ("message_logs", ("edge", "epoch", "iteration"), [(k, *tick_columns(t)) for k, t in forget.logs]),
            ("state_files", ("processor", "epoch", "iteration"), [(k, *tick_columns(t)) for k, t in forget.state]),
            (
                "checkpoints",
                ("processor", "frontier"),
                [(p, json.dumps(frontier_to_json(f))) for p, f in forget.checkpoints],
            ),
        ):
            where = " AND ".join(f"{c} = ?" for c in key_cols)
            for key in keys:
                for row in self._select(table, where, key):
                    files.extend(self._paths.from_json(row["files"], table))
                self._db.execute(f"DELETE FROM {table} WHERE {where}", key)
        self._db.executemany("DELETE FROM sink_commits WHERE sink = ? AND epoch = ?", forget.sinks)
        for sink, epoch in forget.sink_rollbacks.items():
            self._cut_sink_range(sink, epoch)
        for source, upto in forget.offsets_upto.items():
            self._db.execute(
                "DELETE FROM source_offsets WHERE source = ? AND epoch <= ? AND epoch IS NOT "
                "(SELECT max(epoch) FROM source_offsets WHERE source = ? AND offsets != 'null')",
                (source, upto, source),
            )
        return files

    # -- reading ----------------------------------------------------------------------
