"""Rows kept per key, several per key, each with the epoch it arrived in: the state of
a stream-stream join.

Like :class:`~falkirk.spark.state.KeyedState` it is a small log-structured merge of
materialised runs, each hash-partitioned by the key and sorted by it within each
partition, so that an epoch's rows find their matches by merge joins against the
runs in place (nothing of the state is shuffled). Unlike it, nothing is ever
replaced: an epoch appends one run of its rows, with their arrival epoch
(:data:`ARRIVED`).

With a retention of N epochs a row is *alive* in the epoch it arrived and the N-1
after it; lookups see alive rows only, and compaction (every ``compact_every``
epochs) drops the others, so the state holds N epochs of rows. Without retention
every row stays.

Checkpoints: a *base* holds every alive row, a *delta* the rows that arrived since
the previous checkpoint; restoring reads the latest base at or before the epoch and
the deltas after it, keeping the rows still alive then.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from falkirk.recovery.chain import entries_to_restore
from falkirk.spark.frames import empty
from falkirk.spark.materialise import materialise
from falkirk.spark.state import COMPACT_EVERY
from falkirk.storage import StoredFile

#: The column holding the epoch a row arrived in.
ARRIVED = "_a"


class KeyedRows:
    """Append-only rows per key with retention (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        keys: Sequence[str],
        schema: StructType,
        *,
        retain: int | None,
        compact_every: int = COMPACT_EVERY,
    ) -> None:
        """``schema``: the key columns and any others; :data:`ARRIVED` is added."""
        self.spark = spark
        self.keys = tuple(keys)
        self.retain = retain
        self.compact_every = compact_every
        self.schema = StructType([*schema.fields, StructField(ARRIVED, LongType(), False)])
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        self.runs: list[DataFrame] = []
        self.run_epochs: list[int] = []  # the newest arrival epoch in each run
        self.checkpointed_epoch = 0
        self._retired: list[tuple[int, DataFrame]] = []
        self._lock = threading.Lock()

    # -- layout ---------------------------------------------------------------------

    def partitioned(self, df: DataFrame) -> DataFrame:
        """``df`` laid out as the runs are (hash-partitioned and sorted by key)."""
        return df.repartition(self.partitions, *self.keys).sortWithinPartitions(*self.keys)

    def arrived(self, df: DataFrame, epoch: int) -> DataFrame:
        """``df`` (the schema's columns but :data:`ARRIVED`) as rows arriving in ``epoch``,
        partitioned and sorted like the runs, materialised."""
        rows = df.withColumn(ARRIVED, F.lit(epoch).cast("long")).select(*self.schema.fieldNames())
        return materialise(self.partitioned(rows))

    def alive(self, epoch: int) -> Column:
        """True for rows still alive in ``epoch``."""
        if self.retain is None:
            return F.lit(True)
        return F.col(ARRIVED) >= F.lit(epoch - self.retain + 1)

    # -- reading --------------------------------------------------------------------

    def matches(self, probe: DataFrame, epoch: int, *, prefix: str) -> list[DataFrame]:
        """``probe`` (partitioned and sorted by key) merge-joined with every run's rows
        alive in ``epoch``: one DataFrame per run, the runs' non-key columns renamed
        with ``prefix``."""
        found = []
        for run in self.runs:
            stored = run.filter(self.alive(epoch)).select(
                *self.keys, *[F.col(c).alias(prefix + c) for c in self.schema.fieldNames() if c not in self.keys]
            )
            found.append(probe.hint("merge").join(stored, list(self.keys), "inner"))
        return found

    def rows(self, where: Column | None = None) -> DataFrame:
        """Every stored row (``where`` holds), from all runs (O(state))."""
        out = empty(self.spark, self.schema)
        for run in self.runs:
            out = out.unionByName(run if where is None else run.filter(where))
        return out

    # -- updates --------------------------------------------------------------------

    def add(self, run: DataFrame, epoch: int, *, compact: bool = True) -> None:
        """Append ``run`` (from :meth:`arrived`, possibly with columns changed) as the
        rows that arrived in ``epoch``; compacts every ``compact_every`` runs (with
        ``compact=False`` the caller calls :meth:`maybe_compact` once it has read the
        rows whose last epoch this is: compaction drops them)."""
        self.runs.append(run)
        self.run_epochs.append(epoch)
        if compact:
            self.maybe_compact(epoch)

    def maybe_compact(self, epoch: int) -> None:
        """Compact if there are more than ``compact_every`` runs. DataFrames already
        built on the runs stay valid (the old runs are freed once ``epoch`` commits)."""
        if len(self.runs) > self.compact_every:
            self.compact(epoch)

    def compact(self, epoch: int) -> None:
        """Merge the runs into one, without the rows dead after ``epoch`` (O(state))."""
        if len(self.runs) <= 1:
            return
        merged = materialise(self.partitioned(self.rows(self.alive(epoch + 1))))
        for run in self.runs:
            self.retire(epoch, run)
        self.runs, self.run_epochs = [merged], [epoch]

    def retire(self, epoch: int, df: DataFrame) -> None:
        """Free ``df`` once ``epoch`` has committed (see :meth:`release`)."""
        with self._lock:
            self._retired.append((epoch, df))

    def release(self, committed: int) -> None:
        with self._lock:
            free = [df for e, df in self._retired if e <= committed]
            self._retired = [(e, df) for e, df in self._retired if e > committed]
        for df in free:
            df.unpersist()

    def reset(self) -> None:
        for run in self.runs:
            self.retire(max(self.run_epochs, default=0), run)
        self.runs, self.run_epochs = [], []
        self.checkpointed_epoch = 0

    # -- checkpoints ----------------------------------------------------------------

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        """The rows of a base (every row alive after ``epoch``) or delta (rows that
        arrived since the last checkpoint) checkpoint, from then on checkpointed."""
        where = self.alive(epoch + 1) if base else F.col(ARRIVED) > self.checkpointed_epoch
        if base:
            self.compact(epoch)
        rows = self.rows(where)
        self.checkpointed_epoch = epoch
        return rows

    def restore(self, rows: DataFrame, epoch: int) -> None:
        """Load the rows of a checkpoint chain up to ``epoch`` (``rows``: the files'
        rows, this schema): those alive after ``epoch`` become the only run."""
        self.reset()
        keep = self.alive(epoch + 1) & (F.col(ARRIVED) <= epoch)
        self.runs = [materialise(self.partitioned(rows.filter(keep).select(*self.schema.fieldNames())))]
        self.run_epochs = [epoch]
        self.checkpointed_epoch = epoch


def chain_files(chain: Sequence[tuple[int, str, Sequence[StoredFile]]], epoch: int) -> list[str]:
    """The files of the latest base at or before ``epoch`` and the deltas after it
    (:func:`~falkirk.recovery.chain.entries_to_restore`, which raises
    :class:`~falkirk.recovery.exceptions.ChainError` when the chain cannot restore
    ``epoch``)."""
    return [f.path for entry in entries_to_restore(chain, epoch) for f in entry.files]
