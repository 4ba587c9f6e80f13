"""Keyed state held in Spark executors, with incremental Parquet checkpoints.

The state of a keyed operator is a DataFrame (key columns, value columns and
``_epoch``, the epoch that last changed the row) whose lineage is truncated every
epoch with ``localCheckpoint``: its blocks live in the executors, never in the
driver. Losing them is a processor failure that recovery repairs from checkpoints.

A checkpoint is either a *base* (every row) or a *delta* (rows changed since the
previous checkpoint plus tombstones for deleted keys, ``_deleted`` true). The state at
a checkpoint is rebuilt from the latest base at or before it and the deltas after
that base: for each key the row with the greatest ``_epoch`` wins, tombstones drop it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from falkirk.spark.files import write_parquet
from falkirk.storage import StoredFile
from falkirk.storage.filesystem import FileSystem

EPOCH = "_epoch"
DELETED = "_deleted"


class KeyedState:
    """The live state of one keyed operator (see the module docstring)."""

    def __init__(self, spark: SparkSession, keys: Sequence[str], schema: StructType) -> None:
        """``schema`` holds the key columns then the value columns."""
        self.spark = spark
        self.keys = tuple(keys)
        self.schema = schema
        self.values = tuple(f.name for f in schema.fields if f.name not in self.keys)
        self.row_schema = StructType([*schema.fields, StructField(EPOCH, LongType(), False)])
        self.file_schema = StructType([*self.row_schema.fields, StructField(DELETED, BooleanType(), False)])
        self.df: DataFrame = spark.createDataFrame([], self.row_schema)
        self._tombstones: DataFrame | None = None
        self.checkpointed_epoch = 0  # rows with a greater _epoch are not yet checkpointed
        self.version = 0  # the epoch the state is at
        # Materialised DataFrames no longer current, with the epoch whose consumers may
        # still read them: freed by release() once that epoch has committed (epochs
        # in flight read older versions concurrently).
        self._retired: list[tuple[int, DataFrame]] = []

    # -- updates ------------------------------------------------------------------------

    def replace(self, new_df: DataFrame, deleted_keys: DataFrame | None, epoch: int) -> None:
        """Install the state after ``epoch``: ``new_df`` in row schema, and the keys
        this epoch deleted (for the next delta checkpoint)."""
        self.retire(self.version, self.df)
        self.df = new_df.select(*self.row_schema.fieldNames()).localCheckpoint(eager=True)
        if deleted_keys is not None:
            gone = deleted_keys.select(*self.keys).withColumn(EPOCH, F.lit(epoch).cast("long"))
            if self._tombstones is not None:
                self.retire(self.version, self._tombstones)
            merged = gone if self._tombstones is None else self._tombstones.unionByName(gone)
            self._tombstones = merged.localCheckpoint(eager=True)
        self.version = epoch

    def retire(self, epoch: int, df: DataFrame) -> None:
        """Free ``df`` once ``epoch`` has committed (see :meth:`release`)."""
        self._retired.append((epoch, df))

    def release(self, committed: int) -> None:
        """Unpersist retired DataFrames that epochs up to ``committed`` needed."""
        keep = []
        for epoch, df in self._retired:
            if epoch <= committed:
                df.unpersist()
            else:
                keep.append((epoch, df))
        self._retired = keep

    def reset(self) -> None:
        """Back to the initial (empty) state."""
        self.retire(self.version, self.df)
        self.df = self.spark.createDataFrame([], self.row_schema)
        self._tombstones = None
        self.checkpointed_epoch = 0
        self.version = 0

    # -- checkpoints ----------------------------------------------------------------------

    def write_checkpoint(self, parent: str, epoch: int, base: bool, fs: FileSystem) -> list[StoredFile]:
        """Write a base or delta checkpoint of the state after ``epoch``."""
        rows = self.df if base else self.df.filter(F.col(EPOCH) > self.checkpointed_epoch)
        out = rows.withColumn(DELETED, F.lit(False))
        if not base and self._tombstones is not None:
            dead = self._tombstones.filter(F.col(EPOCH) > self.checkpointed_epoch)
            for name in self.values:
                dead = dead.withColumn(name, F.lit(None).cast(self.schema[name].dataType))
            out = out.unionByName(dead.withColumn(DELETED, F.lit(True)))
        files = write_parquet(out.select(*self.file_schema.fieldNames()).coalesce(1), parent, f"e{epoch}-{'base' if base else 'delta'}", fs)
        self.checkpointed_epoch = epoch
        self._tombstones = None
        return files

    def restore(self, chain: Sequence[tuple[int, str, Sequence[StoredFile]]], epoch: int) -> None:
        """Load the state as of checkpoint ``epoch`` from committed checkpoints
        ``(epoch, kind, files)``; raises ``ValueError`` if no base precedes it."""
        usable = [c for c in chain if c[0] <= epoch]
        bases = [i for i, c in enumerate(usable) if c[1] == "base"]
        if not bases:
            raise ValueError(f"no base checkpoint at or before epoch {epoch}")
        files = [f.path for _, _, fs in usable[bases[-1] :] for f in fs]
        rows = self.spark.read.schema(self.file_schema).parquet(*files) if files else self.spark.createDataFrame([], self.file_schema)
        latest = Window.partitionBy(*self.keys).orderBy(F.col(EPOCH).desc())
        state = (
            rows.withColumn("_rank", F.row_number().over(latest))
            .filter((F.col("_rank") == 1) & ~F.col(DELETED))
            .select(*self.row_schema.fieldNames())
        )
        self.retire(self.version, self.df)
        self.df = state.localCheckpoint(eager=True)
        self._tombstones = None
        self.checkpointed_epoch = epoch
        self.version = epoch
