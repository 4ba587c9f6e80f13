"""Writing DataFrames as Parquet under fresh names, and reading them back.

Every write goes to a new directory (a uuid in its name), so a write interrupted by
a crash can never be mistaken for committed data: only directories that a metadata
commit names are read (:mod:`falkirk.storage.metastore`).

State is read back with the schema the running pipeline gives it, so a column the
stored files lack would be read as nulls without a word: :func:`check_stored_schema`
compares the files' own schema first and refuses a mismatch.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from falkirk.graph.exceptions import PipelineChangedError
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


#: The key under which Spark writes a Parquet file's Spark schema (as JSON).
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def stored_schema(spark: SparkSession, path: str) -> StructType | None:
    """The Spark schema a Parquet file was written with: from its footer for a local
    file (pyarrow reads only the footer), by Spark for a file on another file system;
    None for a local file without a readable footer (damage, which the read that
    follows reports as such)."""
    local = path[len("file:") :] if path.startswith("file:") else path
    if "://" not in local and os.path.isfile(local):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            metadata = pq.read_metadata(local).metadata or {}
        except (pa.ArrowException, OSError):
            return None
        if SPARK_SCHEMA_KEY in metadata:
            return StructType.fromJson(json.loads(metadata[SPARK_SCHEMA_KEY]))
    return spark.read.parquet(path).schema


def check_stored_schema(spark: SparkSession, paths: Sequence[str], expected: StructType, owner: str) -> None:
    """Refuse to read state files that lack one of ``expected``'s columns or hold it
    with another type (:class:`PipelineChangedError` naming ``owner``, e.g.
    ``processor 'stats' (aggregate)``): the pipeline that wrote them laid the state
    out otherwise, e.g. a ``sum`` became a ``max``, and reading them would continue
    the new state from nulls. Columns the files have beyond ``expected`` (a removed
    aggregate) are not read and do not matter. One file of each written directory is
    checked (a directory is one write, with one schema)."""
    firsts: dict[str, str] = {}
    for path in paths:
        firsts.setdefault(os.path.dirname(path.rstrip("/")), path)
    for path in firsts.values():
        schema = stored_schema(spark, path)
        if schema is None:
            continue
        found = {f.name: f.dataType.simpleString() for f in schema.fields}
        problems = []
        for field in expected.fields:
            want = field.dataType.simpleString()
            if field.name not in found:
                problems.append(f"column {field.name!r} ({want}) is not in it")
            elif found[field.name] != want:
                problems.append(f"column {field.name!r} is {found[field.name]} there, {want} now")
        if problems:
            raise PipelineChangedError(
                f"{owner}: the rows stored in {os.path.dirname(path)} were written by a pipeline that laid them out "
                f"otherwise: {'; '.join(problems)}. Reading them would mix what the pipeline computed before with "
                "what it computes now. Run the pipeline as it was, or start a new storage root: changing a keyed "
                "processor's state or a logged edge's columns on an existing root is not supported yet"
            )
