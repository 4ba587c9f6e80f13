"""Continuous eventual checkpointing (the CEC paper) of a window operator's state.

Every epoch t appends to the operator's log (one Parquet dataset per epoch, written
and committed with the epoch's output) these rows, each with ``t``, ``n`` (N: the
windows open after t) and a ``fingerprint`` of the row:

=========  ================================================================
``G_open``   a window that opened in t: its state after t
``G_check``  an open window checkpointed again (its footprint was the oldest,
             or sessions merged into it): its state after t
``R``        a window that closed in t (its result): its final state
``X``        a session merged into another one in t: gone without a result
``E``        the epoch: watermark, greatest event time, input and log rows
=========  ================================================================

The *footprint* of an open window is its latest ``G`` row. The eventual checkpoint
at epoch c is every window open at c, each at its footprint t_i; T = min t_i. The
chain entry of epoch c records T (its kind is ``cec:T``), so recovery reads exactly
the log from T to c (the extent): per window its latest row; a window whose latest
row is ``R`` or ``X`` is gone, the others are the eventual checkpoint - exactly
N of them, or the log is damaged. It then replays the processor's own input log of
the epochs after T, each window taking an epoch's rows only if its footprint is
older (:meth:`falkirk.operators.window_frames.Layout.catch_up`): the state is the
state at c, and nothing is emitted again (the results up to c are in the output
log). A fingerprint that does not match its row is damage: recovery stops and says
so; a torn write at the log's end has no commit record, so it is never read.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from falkirk.graph import ContinuousEventualCheckpoint, GraphError
from falkirk.operators.base import Chain
from falkirk.operators.exceptions import OperatorInvariantError
from falkirk.operators.window_frames import (
    CLS,
    END,
    EXISTED,
    FP,
    LAST,
    PREV_FP,
    RETIRED,
    START,
    Layout,
    check_signature,
)
from falkirk.recovery.chain import Cec, entries_to_restore
from falkirk.recovery.extent import Extent
from falkirk.spark.files import check_stored_schema
from falkirk.spark.materialise import materialise
from falkirk.spark.state import KeyedState

E_COLUMNS = ("watermark", "closed_at", "max_time", "input_rows", "log_rows")
#: The epoch row also records the window's settings (see ``window.signature``).
SPEC_COLUMN = "spec"


class CecLog:
    """The CEC log of one window operator: rows per epoch, recovery, the extent."""

    def __init__(self, spark: SparkSession, layout: Layout, state: KeyedState, input_schema: StructType, signature: str) -> None:
        self.spark, self.layout, self.state, self.signature = spark, layout, state, signature
        head = [StructField("kind", StringType(), False), StructField("t", LongType(), False), StructField("n", LongType(), False)]
        window = [input_schema[k] for k in layout.keys] + [
            StructField(c, LongType()) for c in (START, END, LAST)
        ] + [StructField(n, t) for n, t, _ in layout.partials]
        tail = [StructField(c, LongType()) for c in E_COLUMNS] + [StructField(SPEC_COLUMN, StringType())]
        self.columns = [f.name for f in head + window + tail]
        self.schema = StructType(head + window + tail + [StructField("fingerprint", LongType(), False)])
        self.reset()

    def reset(self) -> None:
        self.extent = Extent()
        self.pending: dict[int, DataFrame] = {}
        self.starts: dict[int, int] = {}
        self.catch_up_from: int | None = None
        self.marks: dict[int, int | None] = {}
        self.metrics: dict[str, float] = {
            "g_open_rows": 0, "g_check_rows": 0, "r_rows": 0, "x_rows": 0, "open_windows": 0, "extent_rows": 0, "replay_rows": 0,
        }

    # -- the running operator --------------------------------------------------------------

    def cutoff(self, epoch: int, policy: ContinuousEventualCheckpoint) -> int:
        """Checkpoint again the windows whose footprint is before this (0: none)."""
        if not policy.checks_at(epoch):
            return 0
        return self.extent.checks(epoch, policy.extent_target, policy.replay_target, policy.check_budget)

    def record(
        self, epoch: int, merged: DataFrame, classified: DataFrame, input_rows: int, marks: tuple[int | None, int | None, int | None]
    ) -> None:
        """Epoch ``epoch``'s log rows (written by :meth:`rows`) and the extent's counts."""
        keys = list(self.layout.keys)
        # Footprints replaced (open: sessions merged into a stored identity; check),
        # gone (close) or merged away (retired), per footprint epoch.
        counts = classified.filter(F.col(CLS) != "keep").groupBy(CLS, F.col(PREV_FP).alias(FP)).count()
        retired = merged.select(F.explode(RETIRED).alias("r")).groupBy(F.col("r.fp").alias(FP)).count()
        retired = retired.select(F.lit("retired").alias(CLS), FP, "count")
        tally: Counter[str] = Counter()
        removed: Counter[int] = Counter()
        for row in counts.unionByName(retired).collect():
            cls, fp, n = row[CLS], row[FP], row["count"]
            tally[cls] += n
            if fp is not None:
                removed[fp] += n
        self.extent.remove(removed)
        self.extent.add(epoch, tally["open"] + tally["check"])
        log_rows = tally["open"] + tally["check"] + tally["close"] + tally["retired"] + 1
        self.extent.record(epoch, log_rows, input_rows)
        n = self.extent.open
        self.starts = {e: t for e, t in self.starts.items() if e >= epoch - 64}  # the engine asks right after
        self.starts[epoch] = self.extent.start(epoch)
        window_cols = [*keys, START, END, LAST, *self.layout.names]
        g = classified.filter(F.col(CLS).isin("open", "check")).select(
            F.when((F.col(CLS) == "open") & ~F.col(EXISTED), F.lit("G_open")).otherwise(F.lit("G_check")).alias("kind"), *window_cols
        )
        r = classified.filter(F.col(CLS) == "close").select(F.lit("R").alias("kind"), *window_cols)
        x = merged.select(*keys, F.explode(RETIRED).alias("r")).select(F.lit("X").alias("kind"), *keys, F.col("r.start").alias(START))
        e = self.spark.createDataFrame(
            [("E", *marks, input_rows, log_rows, self.signature)],
            StructType(
                [StructField("kind", StringType(), False)]
                + [StructField(c, LongType()) for c in E_COLUMNS]
                + [StructField(SPEC_COLUMN, StringType())]
            ),
        )
        rows = g.unionByName(r, allowMissingColumns=True).unionByName(x, allowMissingColumns=True).unionByName(e, allowMissingColumns=True)
        rows = rows.withColumn("t", F.lit(epoch).cast("long")).withColumn("n", F.lit(n).cast("long")).select(*self.columns)
        self.pending[epoch] = rows.withColumn("fingerprint", self._fingerprint())
        m = self.metrics
        m["g_open_rows"] += tally["open"]
        m["g_check_rows"] += tally["check"]
        m["r_rows"] += tally["close"]
        m["x_rows"] += tally["retired"]
        m["open_windows"] = n
        m["extent_rows"] = self.extent.extent_rows(epoch)
        m["replay_rows"] = self.extent.replay_rows(epoch)

    def _fingerprint(self) -> Any:
        return F.xxhash64(*[F.col(c) for c in self.columns])

    def rows(self, epoch: int) -> DataFrame:
        """The log rows of ``epoch`` (once; the engine writes them with the epoch)."""
        rows = self.pending.pop(epoch, None)
        if rows is None:
            raise OperatorInvariantError(f"no CEC log rows for epoch {epoch} (the step did not record them)")
        return rows

    def kind(self, epoch: int) -> Cec:
        """The chain kind of ``epoch``'s log entry: ``cec:T``, T its extent's start."""
        return Cec(self.starts[epoch])

    # -- recovery ---------------------------------------------------------------------------

    def restore(self, chain: Chain, epoch: int) -> tuple[int | None, int | None, int | None]:
        """Rebuild the eventual checkpoint at ``epoch`` (see the module docstring);
        returns the window operator's marks after ``epoch`` (watermark, watermark
        windows closed at, greatest event time). The input
        after T is replayed by :meth:`catch_up` (the engine reads it)."""
        started = time.perf_counter()
        self.reset()
        entries = entries_to_restore(chain, epoch)  # cec:T at epoch: the entries from T to epoch
        kind = entries[-1].kind
        if not isinstance(kind, Cec):
            raise GraphError(f"CEC: no log entry for epoch {epoch} in the chain {[(t, k) for t, k, _ in chain]}")
        start = kind.start
        paths = [f.path for entry in entries for f in entry.files]
        check_stored_schema(self.spark, paths, self.schema, "a window processor's CEC log")
        rows = self.spark.read.schema(self.schema).parquet(*paths)
        damaged = rows.filter(F.col("fingerprint") != self._fingerprint()).count()
        if damaged:
            raise GraphError(f"CEC log of epochs {start}..{epoch}: {damaged} rows do not match their fingerprint (damaged log)")
        epochs = {r["t"]: r for r in rows.filter("kind = 'E'").select("t", "n", *E_COLUMNS, SPEC_COLUMN).collect()}
        if sorted(epochs) != list(range(start, epoch + 1)):
            raise GraphError(f"CEC log: epochs {sorted(epochs)} found, {start}..{epoch} expected (a log file is missing)")
        check_signature("(CEC log)", epochs[epoch][SPEC_COLUMN], self.signature)
        ec = self._eventual(rows)
        footprints = [(r["t"], r["count"]) for r in ec.groupBy("t").count().collect()]
        expected = epochs[epoch]["n"]
        if sum(c for _, c in footprints) != expected:
            raise GraphError(
                f"CEC log: {sum(c for _, c in footprints)} open windows rebuilt at epoch {epoch}, its log says N = {expected} (damaged log)"
            )
        ec = ec.withColumnRenamed("t", FP)
        self.state.load(self.layout.regroup(ec, fp=FP, keep=F.lit(True)), start)
        self.state.retire(epoch, ec)
        self.extent = Extent.rebuilt(footprints, [(t, r["log_rows"], r["input_rows"]) for t, r in epochs.items()])
        self.starts[epoch] = start
        self.catch_up_from = start if start < epoch else None
        self.marks = {e: epochs[e - 1]["closed_at"] for e in range(start + 1, epoch + 1)}
        extent = sum(r["log_rows"] for r in epochs.values())
        replay = sum(r["input_rows"] for t, r in epochs.items() if t > start)
        self.metrics.update(
            open_windows=expected,
            extent_rows=extent,
            replay_rows=replay,
            # what this recovery read and replayed (the two above move on with later epochs)
            recovered_extent_rows=extent,
            replayed_rows=replay,
            ec_load_seconds=time.perf_counter() - started,
            extent_start=start,
        )
        last = epochs[epoch]
        return last["watermark"], last["closed_at"], last["max_time"]

    def _eventual(self, rows: DataFrame) -> DataFrame:
        """Per window its latest row in the extent; those that are footprints."""
        identity = [*self.layout.keys, START]
        latest = Window.partitionBy(*identity).orderBy(F.col("t").desc())
        windows = rows.filter("kind <> 'E'").withColumn("_rank", F.row_number().over(latest)).filter("_rank = 1")
        footprints = windows.filter(F.col("kind").isin("G_open", "G_check"))
        return materialise(footprints.select(*self.layout.keys, START, END, LAST, "t", *self.layout.names))

    def catch_up(self, epoch: int, assigned: DataFrame) -> None:
        """Replay input epoch ``epoch`` (after T, up to the restored epoch) into the
        eventual checkpoint; ``assigned``: its valid rows with their windows."""
        started = time.perf_counter()
        mark = self.marks.get(epoch)
        if mark is not None:
            assigned = assigned.filter(F.col("window_end") > F.lit(mark))
        layout = self.layout
        joined = self.state.with_stored(layout.new_arrays(layout.partials_of_rows(assigned))).filter("_found")
        windows = layout.catch_up(layout.exploded(joined), epoch)
        self.state.apply(layout.regroup(windows, fp=FP, keep=F.lit(True)), None, epoch)
        if epoch == max(self.marks, default=epoch):
            self.catch_up_from = None
        self.metrics["catch_up_seconds"] = self.metrics.get("catch_up_seconds", 0) + time.perf_counter() - started
