"""Keyed state held in Spark executors, with incremental Parquet checkpoints.

The state of a keyed operator is a small log-structured merge of DataFrames, every
one materialised with ``localCheckpoint`` (its blocks live in the executors, never in
the driver; losing them is a processor failure that recovery repairs from
checkpoints), hash-partitioned by the key into ``spark.sql.shuffle.partitions``
partitions (the engine's session sets it to the storage root's number:
:mod:`falkirk.runtime.parallelism`) and sorted by the key within each partition:

* the **base** run holds every key as of the last compaction;
* one **delta** run per epoch since then holds the rows that epoch changed, and
  tombstones (``_deleted`` true) for keys it deleted.

For each key the row with the greatest ``_epoch`` wins. An epoch therefore costs
O(its own keys) plus one merge pass over each run: it looks up the stored rows of
the keys it touches by merge joins of its keys (partitioned and sorted the same way)
against the runs in place - nothing of the state is shuffled, sorted or hashed - and
appends one delta run. Every ``compact_every`` epochs the runs are merged into a new
base (one shuffle and sort, then the newest row of each key): an O(state) step,
amortised over those epochs.

A checkpoint is either a *base* (every live row; taking one compacts the runs) or a
*delta* (rows changed since the previous checkpoint plus tombstones). The state at
a checkpoint is rebuilt from the latest base at or before it and the deltas after
that base, by the same rule, in the background: a restarted engine reads and
shuffles its first epoch's input meanwhile. Checkpoint files hold rows, not
partitions: a restore partitions them into the current number (a rescale).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from functools import partial

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from falkirk.recovery.chain import Base, Delta, entries_to_restore
from falkirk.spark.blocks import free
from falkirk.spark.files import check_stored_schema, write_parquet
from falkirk.spark.frames import empty, quote
from falkirk.spark.materialise import materialise
from falkirk.storage import StoredFile
from falkirk.storage.filesystem import FileSystem

EPOCH = "_epoch"
DELETED = "_deleted"
#: Epochs between compactions of the delta runs into the base run.
COMPACT_EVERY = 8


class KeyedState:
    """The live state of one keyed operator (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        keys: Sequence[str],
        schema: StructType,
        *,
        keep_tombstones: bool = True,
        compact_every: int = COMPACT_EVERY,
    ) -> None:
        """``schema`` holds the key columns then the value columns. Tombstones are kept
        until a checkpoint has recorded them; without checkpoints
        (``keep_tombstones=False``) compaction drops them at once."""
        self.spark = spark
        self.keys = tuple(keys)
        self.schema = schema
        self.values = tuple(f.name for f in schema.fields if f.name not in self.keys)
        self.row_schema = StructType([*schema.fields, StructField(EPOCH, LongType(), False)])
        self.file_schema = StructType([*self.row_schema.fields, StructField(DELETED, BooleanType(), False)])
        self.keep_tombstones = keep_tombstones
        self.compact_every = compact_every
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        self._base: DataFrame | None = None  # empty until first needed (a restore replaces it)
        self._restoring: Future[DataFrame] | None = None  # a base being loaded by restore()
        self.base_epoch = 0  # no row of the base run is newer than this epoch
        self.deltas: list[DataFrame] = []
        self.delta_epochs: list[int] = []  # the epoch of each delta run
        self.checkpointed_epoch = 0  # rows with a greater _epoch are not yet checkpointed
        self.version = 0  # the epoch the state is at
        # Materialised DataFrames no longer current, with the epoch whose consumers may
        # still read them: freed by release() once that epoch has committed (epochs
        # in flight read older versions concurrently).
        self._retired: list[tuple[int, DataFrame]] = []
        self._retired_lock = threading.Lock()  # epochs' threads retire, the main thread releases
        self._scratch_of: frozenset[int] = frozenset()  # a scratch copy: the ids of the runs it shares

    def _materialise(self, df: DataFrame, *, partitioned: bool = False) -> DataFrame:
        """Keep ``df`` in the executors (lineage truncated), hash-partitioned by key
        and sorted by key within each partition; ``partitioned`` says it already is
        partitioned (by a join on the key whose output keeps its left side's
        partitioning), sparing a shuffle. (Spark drops the sort if ``df`` is sorted
        already.)"""
        rows = df.select(*self.file_schema.fieldNames())
        if not partitioned:
            rows = rows.repartition(self.partitions, *self.keys)
        return materialise(rows.sortWithinPartitions(*self.keys))

    @property
    def base(self) -> DataFrame:
        """The base run. After :meth:`restore` it is loaded in the background; the
        first use waits for it (and raises what loading it raised)."""
        pending = self._restoring
        if pending is not None:
            self._base = pending.result()
            self._restoring = None
        if self._base is None:
            self._base = self._materialise(empty(self.spark, self.file_schema))
        return self._base

    @base.setter
    def base(self, df: DataFrame) -> None:
        if self._restoring is not None:
            self.base  # noqa: B018 - a restore in flight lands first (and is retired by the caller)
        self._base = df

    def _replaced_runs(self) -> list[DataFrame]:
        """The runs held, for a caller about to replace the whole state: a load in the
        background that failed (its executor lost, say) leaves no base to retire."""
        try:
            return self.held_runs()
        except Exception:  # what replaces the state will be loaded anew
            self._restoring = None
            return [run for run in (self._base, *self.deltas) if run is not None]

    def held_runs(self) -> list[DataFrame]:
        """The runs materialised so far (a restore in flight lands first)."""
        if self._restoring is not None:
            self.base  # noqa: B018
        return [run for run in (self._base, *self.deltas) if run is not None]

    def partitioned(self, df: DataFrame) -> DataFrame:
        """``df`` laid out as the runs are (hash-partitioned by key, sorted by key
        within partitions), ready for :meth:`with_stored`."""
        return df.repartition(self.partitions, *self.keys).sortWithinPartitions(*self.keys)

    def _runs(self) -> list[DataFrame]:
        return [self.base, *self.deltas]

    def _runs_since(self, epoch: int) -> list[DataFrame]:
        """The runs that may hold rows newer than ``epoch`` (the others are skipped
        unread, so a delta checkpoint costs O(its changes), not O(state))."""
        newer = [run for run, e in zip(self.deltas, self.delta_epochs, strict=True) if e > epoch]
        return [self.base, *newer] if self.base_epoch > epoch else newer

    def _latest(self, rows: DataFrame) -> DataFrame:
        """For each key, its row with the greatest ``_epoch`` (tombstones included),
        hash-partitioned and sorted by key: one shuffle and one sort - which the
        runs need anyway - then the first row of each key (no hash aggregation)."""
        newest = Window.partitionBy(*self.keys).orderBy(F.col(EPOCH).desc())
        ordered = rows.repartition(self.partitions, *self.keys).sortWithinPartitions(*self.keys, F.col(EPOCH).desc())
        return ordered.withColumn("_rank", F.row_number().over(newest)).filter("_rank = 1").drop("_rank")

    def _union(self, runs: Sequence[DataFrame]) -> DataFrame:
        out = runs[0]
        for run in runs[1:]:
            out = out.unionByName(run)
        return out

    def _join_runs(self, left: DataFrame) -> DataFrame:
        """``left`` (keys plus any columns, partitioned by key; best sorted by key
        within partitions too) left-joined with every run, oldest first, each later
        match replacing the earlier: ``left``'s columns plus the value columns,
        ``_epoch``, ``_deleted`` and ``_found``. The runs are partitioned and sorted
        by key, so each is merge-joined in place (nothing shuffled, sorted or
        hashed), and the width of the joined rows stays constant however many runs
        there are."""
        own = [c for c in left.columns if c not in self.keys]
        stored = (*self.values, EPOCH, DELETED)
        acc = left.select(
            *self.keys, *own, *[F.lit(None).cast(self.file_schema[c].dataType).alias(c) for c in stored], F.lit(False).alias("_found")
        )
        # SQL text, one JVM call per select: building Column objects costs a call each.
        keys = [quote(k) for k in self.keys]
        run_columns = [*keys, *[f"{quote(c)} AS {quote('_run_' + c)}" for c in stored], "true AS _run_found"]
        picked = [
            *keys,
            *[quote(c) for c in own],
            *[f"CASE WHEN _run_found THEN {quote('_run_' + c)} ELSE {quote(c)} END AS {quote(c)}" for c in stored],
            "_found OR coalesce(_run_found, false) AS _found",
        ]
        for run in self._runs():
            acc = acc.hint("merge").join(run.selectExpr(*run_columns), list(self.keys), "left").selectExpr(*picked)
        return acc

    # -- reading --------------------------------------------------------------------------

    @property
    def df(self) -> DataFrame:
        """Every live row (key, values, ``_epoch``): O(state), for checkpoints and tests."""
        rows = self._merged() if self.deltas else self.base
        return rows.filter(~F.col(DELETED)).select(*self.row_schema.fieldNames())

    def _merged(self) -> DataFrame:
        """Every key's newest row, tombstones included (file schema), O(state)."""
        return self._latest(self._union(self._runs())).select(*self.file_schema.fieldNames())

    def with_stored(self, df: DataFrame) -> DataFrame:
        """``df`` (keys plus any columns, partitioned by key and best sorted by key
        within partitions, as :meth:`partitioned` makes it) with the stored values
        of its keys appended, and ``_found``: whether the key has live state (values
        are null otherwise). Costs a merge pass over the runs in place: O(state) rows
        read, nothing shuffled or copied."""
        found = f"(_found AND NOT {DELETED})"
        return self._join_runs(df).selectExpr(
            *[quote(c) for c in df.columns],
            *[f"CASE WHEN {found} THEN {quote(v)} END AS {quote(v)}" for v in self.values],
            f"{found} AS _found",
        )

    def candidates(self, condition: str) -> DataFrame:
        """The keys having a row - current or superseded - that satisfies the SQL
        ``condition`` on the value columns, partitioned like the runs: a filter over
        the runs in place, then only the matching keys are shuffled. Look the keys
        up with :meth:`with_stored` for their current values (a superseded row may
        have matched)."""
        runs = [run.filter(f"NOT {DELETED} AND ({condition})").select(*self.keys) for run in self._runs()]
        return self.partitioned(self._union(runs).distinct())

    def expiring(self, epoch: int, ttl: int, touched: DataFrame) -> DataFrame | None:
        """The live rows (keys and values) that a time-to-live of ``ttl`` epochs
        removes at ``epoch``: those of the keys last changed in epoch ``epoch - ttl``
        or before and not among ``touched``'s keys (this epoch's), to be deleted by
        this epoch's :meth:`apply`. Under one ``ttl`` every key is removed in the
        epoch it reaches the limit, exactly once; a key older than that (state kept
        from before a ttl was given) goes at the first epoch that looks. None before
        any key can be that old (see :meth:`expiring_where`)."""
        last = epoch - ttl
        if last < 1:
            return None
        return self.expiring_where(f"{EPOCH} <= {last}", touched)

    def expiring_where(self, condition: str, touched: DataFrame) -> DataFrame:
        """The live rows (keys and values) whose current row satisfies the SQL
        ``condition`` (over the value columns and ``_epoch``), but not of
        ``touched``'s keys. Found by a filter over the runs in place - old rows of
        keys changed since match too, as many as the runs hold until the next
        compaction - then looked up (:meth:`candidates`), the condition checked
        again on the current row."""
        found = self._join_runs(self.candidates(condition))
        live = found.filter(f"_found AND NOT {DELETED} AND ({condition})")
        return live.join(touched.select(*self.keys), list(self.keys), "left_anti").select(*self.keys, *self.values)

    # -- updates ------------------------------------------------------------------------

    def apply(
        self, changed: DataFrame, deleted_keys: DataFrame | None, epoch: int, *, partitioned: bool = False
    ) -> DataFrame:
        """Install ``epoch``'s changes: ``changed`` rows (key and values) and the keys
        it deleted; ``partitioned`` if ``changed`` comes straight from
        :meth:`with_stored` (already partitioned by key). Returns the changed rows as
        materialised (key, values, ``_epoch``), for the epoch's output."""
        columns = [*map(quote, (*self.keys, *self.values)), f"CAST({epoch} AS bigint) AS {EPOCH}"]
        delta = changed.selectExpr(*columns, f"false AS {DELETED}")
        if deleted_keys is not None:
            dead = deleted_keys.select(
                *self.keys, *[F.lit(None).cast(self.schema[name].dataType).alias(name) for name in self.values]
            )
            delta = delta.unionByName(dead.selectExpr(*columns, f"true AS {DELETED}"))
        run = self._materialise(delta, partitioned=partitioned and deleted_keys is None)
        self.deltas.append(run)
        self.delta_epochs.append(epoch)
        self.version = epoch
        if len(self.deltas) >= self.compact_every:
            self.compact()  # retires the run only once this epoch has committed
        return run.filter(~F.col(DELETED)).select(*self.row_schema.fieldNames())

    def compact(self) -> None:
        """Merge the delta runs into a new base (O(state))."""
        if not self.deltas:
            return
        merged = self._merged()
        drop: Column = F.col(DELETED)
        if self.keep_tombstones:  # a later delta checkpoint must still record them
            drop = drop & (F.col(EPOCH) <= self.checkpointed_epoch)
        old = self._runs()
        self.base = self._materialise(merged.filter(~drop), partitioned=True)
        for run in old:  # only once the new base stands (materialising it may fail)
            self.retire(self.version, run)
        self.base_epoch = self.version
        self.deltas = []
        self.delta_epochs = []

    def retire(self, epoch: int, df: DataFrame) -> None:
        """Free ``df`` once ``epoch`` has committed (see :meth:`release`)."""
        with self._retired_lock:
            self._retired.append((epoch, df))

    def release(self, committed: int) -> None:
        """Unpersist retired DataFrames that epochs up to ``committed`` needed."""
        with self._retired_lock:
            free = [df for epoch, df in self._retired if epoch <= committed]
            self._retired = [(epoch, df) for epoch, df in self._retired if epoch > committed]
        for df in free:
            df.unpersist()

    def revert(self, epoch: int, checkpointed: int) -> bool:
        """Forget the changes of epochs after ``epoch`` (computed, never committed:
        discarded after an executor loss), in memory: their delta runs are dropped.
        ``checkpointed`` is the epoch of the last *committed* checkpoint (one written
        for a discarded epoch does not count). Returns False, changing nothing, when
        a compaction has merged a later epoch into the base: then only a restore
        from checkpoints brings the state back."""
        if self.held_runs() and self.base_epoch > epoch:
            return False
        for run, e in zip(self.deltas, self.delta_epochs, strict=True):
            if e > epoch:
                self.retire(self.version, run)
        kept = [(run, e) for run, e in zip(self.deltas, self.delta_epochs, strict=True) if e <= epoch]
        self.deltas = [run for run, _ in kept]
        self.delta_epochs = [e for _, e in kept]
        self.version = min(self.version, epoch)
        self.checkpointed_epoch = min(self.checkpointed_epoch, checkpointed)
        return True

    def scratch(self) -> KeyedState:
        """A copy to try a step on (:meth:`falkirk.operators.Operator.trial`): it shares
        this state's runs, and what a step adds or retires stays in the copy, this
        state unchanged. :meth:`drop_scratch` on the copy frees what it added."""
        self.base  # noqa: B018 - a restore in flight lands first, here
        twin = copy.copy(self)
        twin.deltas = list(self.deltas)
        twin.delta_epochs = list(self.delta_epochs)
        twin._retired = []
        twin._retired_lock = threading.Lock()
        twin._scratch_of = frozenset(id(df) for df in self._runs())
        return twin

    def drop_scratch(self) -> None:
        """Free the runs a scratch copy made (not those it shares)."""
        made = [*self._runs(), *(df for _, df in self._retired)]
        for df in made:
            if id(df) not in self._scratch_of:
                free(df)  # its cache entry and its locally checkpointed blocks

    def reset(self) -> None:
        """Back to the initial (empty) state."""
        for run in self._replaced_runs():
            self.retire(self.version, run)
        self._base = None  # empty again, materialised when first needed
        self.base_epoch = 0
        self.deltas = []
        self.delta_epochs = []
        self.checkpointed_epoch = 0
        self.version = 0

    # -- checkpoints ----------------------------------------------------------------------

    def checkpoint_rows(self, base: bool) -> DataFrame:
        """The rows of a base checkpoint (every live row) or of a delta checkpoint (the
        newest row of every key changed or deleted since the last checkpoint; only the
        runs that can hold such rows are read, and one run alone is read as it is:
        it holds one row per key), in the file schema."""
        if base:
            rows = self._merged() if self.deltas else self.base
            out = rows.filter(~F.col(DELETED))
        else:
            since = F.col(EPOCH) > self.checkpointed_epoch
            runs = self._runs_since(self.checkpointed_epoch)
            if len(runs) == 1:  # an eager checkpoint: the epoch's own delta run
                out = runs[0].filter(since)
            elif runs:
                out = self._latest(self._union([run.filter(since) for run in runs]))
            else:  # nothing changed since the last checkpoint: an empty delta
                out = empty(self.spark, self.file_schema)
        return out.select(*self.file_schema.fieldNames())

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        """The rows of a base or delta checkpoint of the state after ``epoch`` (the
        state's current version: call it before the next epoch is applied), from
        then on counted as checkpointed. A base checkpoint compacts the runs first,
        so that it is the new base as it is (and later epochs look up fewer runs).
        The rows are a plan over runs that stay readable until ``epoch`` commits:
        they may be written while later epochs go on."""
        if base:
            self.compact()
        rows = self.checkpoint_rows(base)
        self.checkpointed_epoch = epoch
        return rows

    def write_checkpoint(self, parent: str, epoch: int, base: bool, fs: FileSystem) -> list[StoredFile]:
        """:meth:`checkpoint` written under ``parent`` (by all partitions at once,
        one file each)."""
        label = f"e{epoch}-{Base() if base else Delta()}"
        return write_parquet(self.checkpoint(epoch, base), parent, label, fs)

    def restore(self, chain: Sequence[tuple[int, str, Sequence[StoredFile]]], epoch: int, owner: str = "keyed state") -> None:
        """Load the state as of checkpoint ``epoch`` from committed checkpoints
        ``(epoch, kind, files)``: the last base at or before it and the deltas after
        (:func:`~falkirk.recovery.chain.entries_to_restore`); raises
        :class:`~falkirk.recovery.exceptions.ChainError` (a ``ValueError``) if the
        chain cannot restore ``epoch`` (no base precedes it), and
        :class:`~falkirk.graph.exceptions.PipelineChangedError` (naming ``owner``)
        if the files were written with another layout of the state.

        Returns once the load has started: the rows are read, partitioned and
        materialised by a Spark job in the background, so the engine's start and
        the first epoch's state-independent half overlap it. The first use of the
        runs waits for it."""
        entries = entries_to_restore(chain, epoch)
        files = [f.path for entry in entries for f in entry.files]
        check_stored_schema(self.spark, files, self.file_schema, owner)
        rows = self.spark.read.schema(self.file_schema).parquet(*files) if files else empty(self.spark, self.file_schema)
        for run in self._replaced_runs():
            self.retire(self.version, run)
        if len(entries) == 1:  # a base alone holds one row per key (and no tombstone that counts)
            load = partial(self._materialise, rows.filter(~F.col(DELETED)))
        else:
            load = partial(self._materialise, self._latest(rows).filter(~F.col(DELETED)), partitioned=True)
        loader = ThreadPoolExecutor(1, thread_name_prefix="falkirk-restore")
        context = copy_context()  # the processor's replication holds in the loader's thread too
        self._restoring = loader.submit(context.run, _labelled, self.spark, "restore", load)
        loader.shutdown(wait=False)
        self.base_epoch = epoch
        self.deltas = []
        self.delta_epochs = []
        self.checkpointed_epoch = epoch
        self.version = epoch


    def load(self, rows: DataFrame, epoch: int) -> None:
        """Replace the state by ``rows`` (keys and values, one row per key) as of
        ``epoch``, materialised now."""
        for run in self._replaced_runs():
            self.retire(self.version, run)
        self._restoring = None
        columns = [*map(quote, (*self.keys, *self.values)), f"CAST({epoch} AS bigint) AS {EPOCH}", f"false AS {DELETED}"]
        self.base = self._materialise(self.partitioned(rows.selectExpr(*columns)), partitioned=True)
        self.base_epoch = epoch
        self.deltas = []
        self.delta_epochs = []
        self.checkpointed_epoch = epoch
        self.version = epoch


def _labelled(spark: SparkSession, description: str, work: Callable[[], DataFrame]) -> DataFrame:
    """``work()`` with its Spark jobs named ``description`` (in a thread of its own)."""
    spark.sparkContext.setLocalProperty("spark.job.description", description)
    return work()
