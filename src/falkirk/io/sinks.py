"""Sinks: exactly-once output per epoch.

:class:`ParquetTableSink` writes each epoch as one Parquet file
``epoch-<n>.parquet``, first in a ``_staging-*`` directory (ignored by Parquet
readers), then moved with an atomic rename. A reader of the directory therefore sees
whole epochs only, and a replayed epoch replaces its file with the same rows: no
duplicates.

Visibility - when an epoch's file enters the table (``visibility=``):

* ``"committed"`` (the default): the epoch is written under the table's hidden
  ``_pending/`` folder while it is computed and moved into the table right after the
  storage root's metadata commit of the epoch (crash point ``sink.publish`` between
  the two). A reader never sees an epoch that was not committed: a crash before the
  commit leaves the file pending, and the next run deletes it and writes the epoch
  again; a crash after the commit leaves it pending, and the next run moves it in
  (idempotently) before it runs any epoch. A committed epoch is rewritten only when a
  processor above the sink checkpoints lazily and a crash rolls it back past the
  epoch: the replay then replaces the file, with the same rows when the steps are
  deterministic (sources replay exactly; a non-deterministic function may give other
  rows). Choose ``"released"`` when a reader must never see a file change.
* ``"released"``: the epoch stays in ``_pending/`` until the monitor releases it (no
  rollback can retract it); a rollback deletes pending epochs after its epoch. Readers
  never see a file that is later deleted or rewritten, and the table is always a
  prefix of the epochs - at the price of latency: an epoch appears only once every
  processor above the sink can no longer roll back before it (at its commit with
  eager checkpoints or logged outputs upstream; up to ``every`` epochs later with
  lazy checkpoints), and a run that stops leaves its unreleased epochs pending until
  the next run releases them.
* ``"written"``: the epoch's file enters the table as soon as it is written, before
  the epoch commits (the lowest latency; the default of earlier releases). Caveat: a
  reader may see an epoch that a crash then leaves uncommitted; the next run writes
  it again (replacing the file, with the same rows when the steps are deterministic).

Next to each epoch file a hidden ``.epoch-<n>.parquet.sha256`` (its *sidecar*)
records its size and SHA-256, so that the table can be checked at any time, long
after the epoch's commit record was forgotten, against the epochs its storage root
committed to the sink (:func:`falkirk.io.table_check.verify_table`, ``falkirk verify
STORAGE TABLE``). The sidecar becomes visible before its file, never after: it is
written under a temporary name, made durable and renamed into place, and only then
is the epoch file renamed next to it (a move from ``_pending`` moves the sidecar
first too). A crash between the two leaves a sidecar without its file - for an
epoch that had not committed yet, which the next run writes again - never a file
that cannot be checked, nor a torn sidecar.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from falkirk.graph.exceptions import GraphError
from falkirk.io.exceptions import SinkError
from falkirk.spark.files import stored_schema
from falkirk.storage import StoredFile
from falkirk.storage.filesystem import FileSystem, filesystem_for, is_uri, local_path, part_files
from falkirk.storage.published import host_name, process_alive, process_start

_EPOCH_FILE = re.compile(r"epoch-\d+\.parquet$")
_EPOCH_NUMBER = re.compile(r"/epoch-(\d+)\.parquet$")
VISIBILITIES = ("committed", "released", "written")
#: The hidden folder of a table's epochs written but not released yet.
PENDING = "_pending"
#: The lock a driver holds on a local table while it writes it (hidden from readers).
TABLE_LOCK = "_falkirk.lock"
#: Open lock files of the tables this process writes, by table directory.
_held_tables: dict[str, int] = {}
_held_lock = threading.Lock()


@dataclass(frozen=True)
class ParquetTableSink:
    """A directory of per-epoch Parquet files; ``epoch_column`` (if set) adds the
    epoch number as an int64 column. ``path`` is a local directory or any Hadoop
    filesystem URI Spark can write."""

    path: str
    epoch_column: str | None = "epoch"
    visibility: str = "committed"

    def __post_init__(self) -> None:
        if not is_uri(self.path):  # Spark resolves relative paths against the JVM's directory
            object.__setattr__(self, "path", os.path.abspath(self.path))
        if self.visibility not in VISIBILITIES:
            raise GraphError(f"ParquetTableSink({self.path!r}): visibility must be one of {VISIBILITIES}, got {self.visibility!r}")

    # -- the TransactionalSink protocol (see the module docstring) ------------------------

    def bind(self, pipeline: str, processor: str) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        """What the storage root records of this sink (``falkirk verify`` finds the
        table's committed epochs by its path)."""
        return {"kind": "parquet", "path": self.path, "visibility": self.visibility}

    def take_lease(self, *, shared: bool) -> None:
        """Hold an exclusive lock on a local table (``_falkirk.lock`` in it, hidden from
        Parquet readers) while the run lasts: a second driver writing the same table -
        a copy of the storage root started next to the original, or another pipeline
        - is refused before it writes or deletes anything. The kernel releases it when
        the driver dies. A driver pair's members share their tables by design
        (``shared``); a table on a Hadoop URI cannot be locked this way."""
        directory = self._local_directory()
        if shared or directory is None:
            return
        with _held_lock:
            if directory in _held_tables:
                raise SinkError(f"ParquetTableSink({self.path!r}): this process writes the table already (another sink or engine)")
            os.makedirs(directory, exist_ok=True)
            fd = os.open(os.path.join(directory, TABLE_LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SinkError(
                    f"ParquetTableSink({self.path!r}): another driver is writing this table (a copy of this "
                    "storage root started next to the original, or another pipeline). A copy of a storage root is "
                    "a restore, not a fork: run one copy at a time, or give each pipeline a table of its own"
                ) from None
            _held_tables[directory] = fd

    def drop_lease(self) -> None:
        """Let the table's lock go (the run ended)."""
        directory = self._local_directory()
        with _held_lock:
            fd = _held_tables.pop(directory, None) if directory is not None else None
        if fd is not None:
            os.close(fd)

    def _local_directory(self) -> str | None:
        """The table's local directory (None on a remote Hadoop file system)."""
        if not is_uri(self.path):
            return self.path
        return local_path(self.path)

    def pre_commit(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """``written``: write the epoch into the table; otherwise into ``_pending``
        (the file enters the table at :meth:`publish_upto` or :meth:`commit_upto`)."""
        if self.visibility == "written":
            return self.write(df, epoch)
        fs, root = filesystem_for(self.path, df.sparkSession)
        stored = self._write(df, epoch, fs, root, fs.join(root, PENDING))[0]
        # What is committed with the epoch names the file where it will be read.
        return [StoredFile(fs.join(root, epoch_name(epoch)), stored.size, stored.sha256)] if self.visibility == "committed" else []

    def publish_upto(self, epoch: int) -> None:
        """``committed``: move pending epochs up to ``epoch`` (committed) into the
        table, in order (idempotent); the other visibilities wait for a release or
        are visible already."""
        if self.visibility == "committed":
            self._move_pending(epoch)

    def commit_upto(self, epoch: int) -> None:
        """Move pending epochs up to ``epoch`` (released) into the table, in order
        (idempotent)."""
        if self.visibility != "written":
            self._move_pending(epoch)

    def _move_pending(self, epoch: int) -> None:
        fs, root = self._fs()
        for e, path in self._pending(fs, root):
            if e <= epoch:
                final = fs.join(root, path.rsplit("/", 1)[-1])
                # The sidecar first, as a write does (see the module docstring); a
                # crashed attempt may have moved it already.
                if fs.size(checksum_file(fs, path)) is not None:
                    fs.replace(checksum_file(fs, path), checksum_file(fs, final))
                fs.replace(path, final)

    def abort_after(self, epoch: int) -> None:
        """Delete pending epochs after ``epoch`` (idempotent)."""
        if self.visibility == "written":
            return
        fs, root = self._fs()
        for e, path in self._pending(fs, root):
            if e > epoch:
                fs.delete(path)  # the file first: a crash leaves a sidecar alone, never a file unchecked
                fs.delete(checksum_file(fs, path))

    def _fs(self) -> tuple[FileSystem, str]:
        """The table's file system, through the session :meth:`prepare` was given
        (the thread that publishes or releases may have no active session)."""
        from pyspark.sql import SparkSession

        spark = self.__dict__.get("_spark") or SparkSession.getActiveSession()
        if spark is None:
            raise GraphError("internal: ParquetTableSink used before prepare() and without an active SparkSession")
        return filesystem_for(self.path, spark)

    def _pending(self, fs: FileSystem, root: str) -> list[tuple[int, str]]:
        pending = fs.join(root, PENDING)
        found = [(int(m.group(1)), path) for path, _ in fs.children(pending) if (m := _EPOCH_NUMBER.search(path))]
        return sorted(found)

    def prepare(self, empty: DataFrame) -> None:
        """Make the table readable before the first epoch (an empty file with the
        schema) and remove staging files of writes a crash interrupted."""
        object.__setattr__(self, "_spark", empty.sparkSession)  # (a cache, not part of the sink's value)
        fs, root = filesystem_for(self.path, empty.sparkSession)
        fs.mkdirs(root)
        entries = fs.children(root)
        for path, _ in entries:
            if _interrupted(path.rsplit("/", 1)[-1]):  # (never the table's lock: not a staging folder)
                fs.delete(path)
        expected = self._stamp(empty, 0)
        if not any(_EPOCH_FILE.search(path) for path, _ in entries):
            self._write_schema(expected, fs, root)
            return
        schema_file = fs.join(root, epoch_name(0))
        held = stored_schema(empty.sparkSession, schema_file) if fs.size(schema_file) is not None else None
        grown = grown_schema(self.path, held, expected.schema)
        if grown is not None:  # the output has new columns (a pipeline's new version)
            self._write_schema(empty.sparkSession.createDataFrame([], grown), fs, root)

    def _write_schema(self, empty: DataFrame, fs: FileSystem, root: str) -> None:
        """The table's schema as epoch 0's (empty) file, which sorts first - pyarrow,
        pandas and DuckDB read a directory's schema from its first file - and as
        ``_common_metadata``, which Spark reads first: ordinary readers see every
        column, and null where an older epoch's file lacks one."""
        written = self.write(empty, 0)[0]
        write_summary(fs, written.path, fs.join(root, SUMMARY))

    def _stamp(self, df: DataFrame, epoch: int) -> DataFrame:
        if self.epoch_column is None:
            return df
        return df.withColumn(self.epoch_column, F.lit(epoch).cast("long"))

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch into the table (replacing an earlier attempt of the same
        epoch)."""
        fs, root = filesystem_for(self.path, df.sparkSession)
        return self._write(df, epoch, fs, root, root)

    def _write(self, df: DataFrame, epoch: int, fs: FileSystem, root: str, directory: str) -> list[StoredFile]:
        """Stage the epoch under ``root`` and move it into ``directory`` (the table, or
        its pending folder)."""
        staging = fs.join(root, f"_staging-e{epoch}-{uuid.uuid4().hex[:12]}~{_WRITER}")
        self._stamp(df, epoch).coalesce(1).write.parquet(staging)
        part = fs.make_durable(part_files(fs, staging))[0]
        fs.mkdirs(directory)
        final = fs.join(directory, epoch_name(epoch))
        # Step 1: the sidecar, whole and durable in the staging folder (a crash before
        # the rename leaves it there, and prepare() removes the folder), then renamed
        # into place: a reader never sees it torn.
        record = {"size": part.size, "sha256": part.sha256}
        fs.write_bytes(fs.join(staging, "sidecar"), json.dumps(record).encode())
        fs.replace(fs.join(staging, "sidecar"), checksum_file(fs, final))
        # Step 2: the file (durable since make_durable above; the rename makes its
        # name durable), next to the sidecar that vouches for it.
        fs.replace(part.path, final)
        fs.delete(staging)
        return [StoredFile(final, part.size, part.sha256)]


#: Who stages a write (``pid.start@host``): a driver pair's two drivers share tables,
#: and one must not remove what the other is writing.
_WRITER = f"{os.getpid()}.{process_start(os.getpid())}@{host_name()}"


def _interrupted(name: str) -> bool:
    """Whether ``name`` is a staging folder of a write a crash interrupted: this
    host's writer is dead (another host's is left alone: hidden, harmless)."""
    if not name.startswith("_staging"):
        return False
    writer, at, host = name.partition("~")[2].partition("@")
    if not at:
        return True  # named before writers were recorded
    pid, _, start = writer.partition(".")
    return host == host_name() and pid.isdigit() and not process_alive(int(pid), None if start == "None" else start)


#: The table's summary file, holding its schema (read by Spark before any data file).
SUMMARY = "_common_metadata"


def grown_schema(table: str, held: StructType | None, output: StructType) -> StructType | None:
    """The schema a table must declare when a run's ``output`` differs from the one
    it declares (``held``, its epoch 0 file's; None: none): the output's columns,
    then those only older epochs have (a reader must still see them). None when
    nothing changes; :class:`SinkError` when a column changes its type (files of
    both types cannot be read as one table)."""
    if held is None:
        return output
    old = {f.name: f for f in held.fields}
    for f in output.fields:
        if f.name in old and old[f.name].dataType != f.dataType:
            raise SinkError(
                f"ParquetTableSink({table!r}): column {f.name!r} is {old[f.name].dataType.simpleString()} in the table "
                f"and {f.dataType.simpleString()} in this run's output: readers cannot read both as one column; "
                "cast it back, or write to a new table"
            )
    names = {f.name for f in output.fields}
    if set(old) <= names:
        return None if set(old) == names else output
    return StructType([*output.fields, *[StructField(f.name, f.dataType, True) for f in held.fields if f.name not in names]])


def write_summary(fs: FileSystem, parquet_file: str, summary: str) -> None:
    """Write ``summary`` (``_common_metadata``): the schema of ``parquet_file``."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as local:
        source = local_path(parquet_file)
        if source is None:
            source = os.path.join(local, "schema.parquet")
            fs.download(parquet_file, source)
        target = os.path.join(local, SUMMARY)
        pq.write_metadata(pq.read_schema(source), target)
        fs.upload(target, summary)


def epoch_name(epoch: int) -> str:
    """The name of ``epoch``'s file in a table (or its ``_pending`` folder)."""
    return f"epoch-{epoch:010d}.parquet"


def checksum_file(fs: FileSystem, epoch_file: str) -> str:
    """The sidecar of ``epoch_file``: the hidden file next to it that records its
    size and SHA-256 (``{"size": ..., "sha256": ...}``)."""
    directory, name = epoch_file.rsplit("/", 1)
    return fs.join(directory, f".{name}.sha256")


@dataclass
class MemorySink:
    """Keeps each epoch's rows in the driver, for tests (idempotent per epoch)."""

    epochs: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    epoch_column: str | None = None

    def prepare(self, empty: DataFrame) -> None:
        return None

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        self.epochs[epoch] = [row.asDict() for row in df.collect()]
        return []
