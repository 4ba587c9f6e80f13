"""Writing DataFrames as Parquet under fresh names, and reading them back.

Every write goes to a new directory (a uuid in its name), so a write interrupted by
a crash can never be mistaken for committed data: only directories that a metadata
commit names are read (:mod:`falkirk.storage.metastore`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from falkirk.storage import StoredFile, make_durable


def write_parquet(df: DataFrame, parent: str | Path, label: str) -> list[StoredFile]:
    """Write ``df`` to a fresh directory under ``parent``; return its data files,
    fsynced, with their sizes (ready to be committed)."""
    target = Path(parent) / f"{label}-{uuid.uuid4().hex[:12]}"
    df.write.mode("errorifexists").parquet(str(target))
    return make_durable(sorted(target.glob("part-*.parquet")))


def read_parquet(spark: SparkSession, files: Sequence[StoredFile], schema: str | None = None) -> DataFrame:
    """Read committed files (all written with the same schema)."""
    reader = spark.read
    if schema is not None:
        reader = reader.schema(schema)
    return reader.parquet(*[f.path for f in files])
