"""Sinks: exactly-once output per epoch.

:class:`ParquetTableSink` writes each epoch as one Parquet file
``epoch-<n>.parquet``, first under ``_staging/`` (ignored by Parquet readers), then
moved into place with an atomic rename. A reader of the directory therefore sees
whole epochs only, and a replayed epoch replaces its file with the same rows: no
duplicates.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.storage import StoredFile, make_durable


@dataclass(frozen=True)
class ParquetTableSink:
    """A directory of per-epoch Parquet files; ``epoch_column`` (if set) adds the
    epoch number as an int64 column."""

    path: str
    epoch_column: str | None = "epoch"

    def __post_init__(self) -> None:
        # Spark resolves relative paths against the JVM's directory, not ours.
        object.__setattr__(self, "path", os.path.abspath(self.path))

    def prepare(self, empty: DataFrame) -> None:
        """Make the table readable before the first epoch (an empty file with the
        schema) and remove staging files of writes a crash interrupted."""
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(root / "_staging", ignore_errors=True)  # writes a crash interrupted
        if not any(root.glob("epoch-*.parquet")):
            self.write(self._stamp(empty, 0), 0)

    def _stamp(self, df: DataFrame, epoch: int) -> DataFrame:
        if self.epoch_column is None:
            return df
        return df.withColumn(self.epoch_column, F.lit(epoch).cast("long"))

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch (replacing an earlier attempt of the same epoch)."""
        root = Path(self.path)
        staging = root / "_staging" / f"e{epoch}-{uuid.uuid4().hex[:12]}"
        self._stamp(df, epoch).coalesce(1).write.parquet(str(staging))
        parts = sorted(staging.glob("part-*.parquet"))
        final = root / f"epoch-{epoch:010d}.parquet"
        make_durable(parts)
        os.replace(parts[0], final)
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):  # only when no other write is staged
            staging.parent.rmdir()
        return make_durable([final])


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
