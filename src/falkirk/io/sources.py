"""Sources: cutting input into epochs, and re-reading an epoch exactly on replay.

:class:`FileSource` consumes the files of a directory in name order,
``files_per_epoch`` at a time; files may keep arriving. An epoch's offsets are the
list of its files: they are committed before the epoch is processed, so a replay
after a crash reads exactly the same files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from falkirk.graph.exceptions import GraphError

FORMATS = ("csv", "json", "parquet")


@dataclass(frozen=True)
class FileSource:
    """Files of ``path`` (``csv``, ``json`` or ``parquet``) read with ``schema`` (a
    DDL string) and reader ``options``; names starting with ``.`` or ``_`` are
    ignored (files being written)."""

    path: str
    format: str
    schema: str
    files_per_epoch: int = 1
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Spark resolves relative paths against the JVM's directory, not ours.
        object.__setattr__(self, "path", os.path.abspath(self.path))
        if self.format not in FORMATS:
            raise GraphError(f"FileSource({self.path!r}): format must be one of {FORMATS}, got {self.format!r}")
        if self.files_per_epoch < 1:
            raise GraphError(f"FileSource({self.path!r}): files_per_epoch must be >= 1")

    def struct(self, spark: SparkSession) -> StructType:
        return spark.createDataFrame([], self.schema).schema

    def next_offsets(self, consumed: set[str]) -> list[str] | None:
        """The files of the next epoch, or None when no new file is there."""
        directory = Path(self.path)
        if not directory.is_dir():
            raise GraphError(f"FileSource: input directory {self.path!r} does not exist")
        fresh = sorted(
            p.name
            for p in directory.iterdir()
            if p.is_file() and not p.name.startswith((".", "_")) and p.name not in consumed
        )
        return fresh[: self.files_per_epoch] or None

    def count_records(self, offsets: Sequence[Any]) -> int:
        """Records in these files, for progress display: lines of text formats (minus a
        header), 0 for Parquet. Never used for processing."""
        if self.format == "parquet":
            return 0
        header = 1 if self.options.get("header") == "true" else 0
        total = 0
        for name in offsets:
            with open(Path(self.path) / name, "rb") as f:
                total += max(sum(1 for _ in f) - header, 0)
        return total

    def read(self, spark: SparkSession, offsets: Sequence[Any]) -> DataFrame:
        """The rows of one epoch."""
        paths = [str(Path(self.path) / name) for name in offsets]
        reader = spark.read.schema(self.schema).options(**self.options)
        if self.format == "parquet":  # DataFrameReader.parquet takes paths as varargs
            return reader.parquet(*paths)
        df: DataFrame = getattr(reader, self.format)(paths)
        return df
