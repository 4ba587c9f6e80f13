"""Sinks: exactly-once output per epoch.

:class:`ParquetTableSink` writes each epoch as one Parquet file
``epoch-<n>.parquet``, first in a ``_staging-*`` directory (ignored by Parquet
readers), then moved into place with an atomic rename. A reader of the directory
therefore sees whole epochs only, and a replayed epoch replaces its file with the
same rows: no duplicates. A rollback never deletes an epoch's file: the replay of
the epoch replaces it.

Next to each epoch file a hidden ``.epoch-<n>.parquet.sha256`` records its size and
SHA-256, so that the table can be checked at any time, long after the epoch's commit
record was forgotten (:func:`verify_table`, ``falkirk verify STORAGE TABLE``).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.storage import CorruptStorageError, StoredFile, verify_files
from falkirk.storage.filesystem import FileSystem, filesystem_for, is_uri, part_files

_EPOCH_FILE = re.compile(r"epoch-\d+\.parquet$")


@dataclass(frozen=True)
class ParquetTableSink:
    """A directory of per-epoch Parquet files; ``epoch_column`` (if set) adds the
    epoch number as an int64 column. ``path`` is a local directory or any Hadoop
    filesystem URI Spark can write."""

    path: str
    epoch_column: str | None = "epoch"

    def __post_init__(self) -> None:
        if not is_uri(self.path):  # Spark resolves relative paths against the JVM's directory
            object.__setattr__(self, "path", os.path.abspath(self.path))

    def prepare(self, empty: DataFrame) -> None:
        """Make the table readable before the first epoch (an empty file with the
        schema) and remove staging files of writes a crash interrupted."""
        fs, root = filesystem_for(self.path, empty.sparkSession)
        fs.mkdirs(root)
        entries = fs.children(root)
        for path, _ in entries:
            if path.rsplit("/", 1)[-1].startswith("_staging"):  # writes a crash interrupted
                fs.delete(path)
        if not any(_EPOCH_FILE.search(path) for path, _ in entries):
            self.write(self._stamp(empty, 0), 0)

    def _stamp(self, df: DataFrame, epoch: int) -> DataFrame:
        if self.epoch_column is None:
            return df
        return df.withColumn(self.epoch_column, F.lit(epoch).cast("long"))

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch (replacing an earlier attempt of the same epoch)."""
        fs, root = filesystem_for(self.path, df.sparkSession)
        staging = fs.join(root, f"_staging-e{epoch}-{uuid.uuid4().hex[:12]}")
        self._stamp(df, epoch).coalesce(1).write.parquet(staging)
        parts = fs.make_durable(part_files(fs, staging))
        final = fs.join(root, f"epoch-{epoch:010d}.parquet")
        fs.replace(parts[0].path, final)
        fs.delete(staging)
        stored = fs.make_durable([final])
        record = {"size": stored[0].size, "sha256": stored[0].sha256}
        fs.write_bytes(_checksum_file(fs, final), json.dumps(record).encode())
        return stored


def _checksum_file(fs: FileSystem, epoch_file: str) -> str:
    directory, name = epoch_file.rsplit("/", 1)
    return fs.join(directory, f".{name}.sha256")


def verify_table(fs: FileSystem, directory: str) -> tuple[int, list[str]]:
    """Check every epoch file of a :class:`ParquetTableSink` table against the size
    and SHA-256 recorded when it was written: (files checked, problems found)."""
    problems: list[str] = []
    files = [path for path, is_dir in fs.children(directory) if not is_dir and _EPOCH_FILE.search(path)]
    for path in files:
        raw = fs.read_bytes(_checksum_file(fs, path))
        if raw is None:
            problems.append(f"{path} has no recorded checksum (written by an older Falkirk?)")
            continue
        record = json.loads(raw)
        try:
            verify_files([StoredFile(path, int(record["size"]), str(record["sha256"]))], fs)
        except CorruptStorageError as exc:
            problems.append(str(exc))
    return len(files), problems


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
