"""Writing DataFrames as Parquet under fresh names, and reading them back.

Every write goes to a new directory (a uuid in its name), so a write interrupted by
a crash can never be mistaken for committed data: only directories that a metadata
commit names are read (:mod:`falkirk.storage.metastore`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from falkirk.storage import StoredFile
from falkirk.storage.filesystem import FileSystem, LocalFileSystem, part_files


def write_parquet(df: DataFrame, parent: str, label: str, fs: FileSystem | None = None) -> list[StoredFile]:
    """Write ``df`` to a fresh directory under ``parent`` (on ``fs``, local by
    default); return its data files, durable, with their sizes (ready to be committed)."""
    fs = fs or LocalFileSystem()
    target = fs.join(parent, f"{label}-{uuid.uuid4().hex[:12]}")
    df.write.mode("errorifexists").parquet(target)
    return fs.make_durable(part_files(fs, target))


def read_parquet(spark: SparkSession, files: Sequence[StoredFile], schema: str | None = None) -> DataFrame:
    """Read committed files (all written with the same schema)."""
    reader = spark.read
    if schema is not None:
        reader = reader.schema(schema)
    return reader.parquet(*[f.path for f in files])
