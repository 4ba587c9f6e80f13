"""``window``: aggregates per key and event-time window, closed by a watermark.

See :mod:`falkirk.graph.windows` for what a user gets and
:mod:`falkirk.operators.window_frames` for the state's layout. An epoch:

1. (before the previous epoch has merged) the epoch's rows are assigned their
   windows and aggregated into per-window partials, materialised; an observation on
   the same job gives the epoch's greatest event time and row count;
2. partials whose window closed in an earlier epoch (its end at or below the
   watermark that epoch closed windows at) are late (their rows go to the ``late``
   output); the others are merged with the stored windows of their keys (looked up
   in place);
3. the windows of the touched keys, and of the keys whose ``min_end`` (or, under
   CEC, ``min_fp``) says they hold a window to close at the watermark the epoch
   started with (or to checkpoint), are classified and regrouped into the keys' new
   arrays - one delta run of the state; the watermark advances (greatest event time
   seen minus the delay);
4. with a ``ttl``, the keys it removes (neither touched nor closing a window this
   epoch, and idle for the ttl: see :meth:`WindowOperator._expiring`) are found by a
   filter over the state's runs in place, deleted in the same delta run, and their
   open windows go to the ``expired`` output;
5. output: the windows that closed (append) or were updated (update).

With lazy or eager checkpoints the state's checkpoint carries one extra row with
the watermark (a tombstone with null keys, which no restore keeps); under
:class:`~falkirk.graph.ContinuousEventualCheckpoint` the operator writes its log
instead (:mod:`falkirk.operators.cec`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from falkirk.graph import GraphError
from falkirk.graph.durations import micros
from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import EXPIRED_PORT
from falkirk.graph.windows import EventTimeTtl, WindowSpec
from falkirk.operators.base import Chain, Step, require, state_columns
from falkirk.operators.cec import CecLog
from falkirk.operators.event_time import EventTime, shape_text
from falkirk.operators.exceptions import OperatorInvariantError
from falkirk.operators.keyed import KeyedOperator, check_ttl_scope, ttl_setting
from falkirk.operators.window_frames import (
    CLS,
    FINAL_WATERMARK,
    LAST,
    MIN_END,
    MIN_FP,
    UPDATED,
    WINDOWS,
    Layout,
    check_signature,
    late_schema,
    signature,
)
from falkirk.recovery.chain import Cec, ChainKind
from falkirk.spark.materialise import materialise
from falkirk.spark.state import DELETED, EPOCH, KeyedState

META, WATERMARK, CLOSED_AT, MAX_TIME, SPEC = "_meta", "_watermark", "_closed_at", "_max_time", "_spec"
#: The output's window bounds.
BOUNDS = ("window_start", "window_end")
#: A watermark is a 64-bit integer: an event time minus a delay below this is this.
LOWEST_WATERMARK = -(2**63)


class WindowOperator(KeyedOperator):
    spec_type = WindowSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, WindowSpec)
        self.spec = spec
        schema = inputs[0]
        columns = [c for _, c in spec.aggregates.values() if c]
        require(schema, [*spec.key, spec.time, *columns])
        #: The event-time column and the units computed with (microseconds over a timestamp).
        self.time = EventTime.of(spec, schema)
        #: Aggregates of the event time itself (min, max), given back as timestamps.
        self.time_outputs = self.time.aggregates_of_time(spec.aggregates)
        self.input_schema = schema
        schema = self.time.inside(schema)
        self.input_columns = schema.fieldNames()
        self.layout = Layout.of(spec.key, spec.time, self.time.shape, dict(spec.aggregates), schema, spec.fn)
        self.cec = self.processor.policy.checkpoints_eventually
        #: ``ttl``: epochs (an int), or the span on event time in the units computed with.
        self.ttl: int | None = spec.ttl if isinstance(spec.ttl, int) else None
        self.ttl_span: int | None = micros(spec.ttl.span) if isinstance(spec.ttl, EventTimeTtl) else None  # type: ignore[arg-type]
        if spec.ttl is not None:
            check_ttl_scope(self.processor)
            if self.cec:
                raise GraphError(
                    f"window processor {self.name!r}: ttl= is not available with ContinuousEventualCheckpoint (its log "
                    "re-records idle windows, so they never look idle); use LazyCheckpoint or EagerCheckpoint, or drop ttl="
                )
        delta_checkpoints = self.processor.policy.writes_checkpoints and not self.cec
        self.state = KeyedState(self.spark, (*spec.key,), self.layout.state_schema(schema), keep_tombstones=delta_checkpoints)
        #: What the stored state means: a restore with other settings is refused.
        self.signature = signature(spec, self.cec, self.time)
        self.log = CecLog(self.spark, self.layout, self.state, schema, self.signature) if self.cec else None
        #: The watermark after the last epoch (the next one closes windows with it).
        self.watermark: int | None = None
        #: The watermark the last epoch closed windows with: a row whose window
        #: ends at or below it is late (its window has closed).
        self.closed_at: int | None = None
        self.max_time: int | None = None
        #: Counters for reports and the bench (this run's, not persisted).
        self.metrics: dict[str, float] = {"late_rows": 0, "invalid_rows": 0, "input_rows": 0}
        fields = [schema[k] for k in spec.key] + [StructField("window_start", LongType()), StructField("window_end", LongType())]
        for out, (func, _) in spec.aggregates.items():
            part = next(t for n, t, _ in self.layout.partials if n.startswith(f"{out}__"))
            fields.append(StructField(out, {"count": LongType(), "avg": DoubleType()}.get(func, part)))
        if spec.fn is not None:
            own = self.spark.createDataFrame([], spec.output_schema).schema
            clash = [f.name for f in own.fields if f.name in {f.name for f in fields}]
            if clash:
                raise GraphError(f"window: output_schema repeats {clash}, which the output has already (the key and the window)")
            fields += own.fields
        #: The output as computed (window bounds in the units computed with) and as seen.
        self.inside_output = StructType(fields)
        timed = {*BOUNDS, *self.time_outputs}
        self.output_schema = StructType([StructField(f.name, self.time.bound_type) if f.name in timed else f for f in fields])
        ports = {"out": self.output_schema, "late": late_schema(self.input_schema, self.time.bound_type)}
        if spec.ttl is not None:
            ports[EXPIRED_PORT] = self.output_schema  # the open windows of the keys that expired
        return ports

    def state_signature(self) -> StateSignature:
        """What :func:`~falkirk.operators.window_frames.signature` holds (checked
        again at restore, for roots written before signatures were recorded), as a
        signature: keys, aggregates, each window's stored partials, the settings that
        place rows in windows and close them. Whether the state is a CEC log or
        checkpoints is the policy's (checked with the policy)."""
        spec = self.spec
        keys = StructType([f for f in self.state.schema.fields if f.name in spec.key])
        partials = tuple((name, dtype.simpleString()) for name, dtype, _ in self.layout.partials)
        fn = getattr(spec.fn, "__qualname__", repr(spec.fn)) if spec.fn is not None else None
        settings = {"shape": shape_text(spec, self.time), "time": spec.time, "watermark_delay": self.time.delay, "mode": spec.mode, "fn": fn}
        settings.update(ttl_setting(self.ttl if self.ttl_span is None else f"event time {self.ttl_span}"))
        return StateSignature.of(
            self.processor.kind, keys=spec.key, aggregates=spec.aggregates, columns=state_columns(keys) + partials, settings=settings
        )

    # -- an epoch ---------------------------------------------------------------------

    def _prepare(self, rows: DataFrame, version: int) -> tuple[DataFrame, DataFrame, Observation]:
        """Assigned rows (lazy, for the late output), their partials (materialised)
        and the observation of the epoch's greatest event time, valid and invalid
        rows, taken by the same job."""
        ok = self.layout.valid()
        seen = Observation(f"{self.name} e{version} rows")
        observed = rows.observe(
            seen,
            F.max(F.when(ok, F.col(self.spec.time).cast("long"))).alias("max_time"),
            F.count(F.when(ok, F.lit(1))).alias("rows"),
            F.count(F.when(~ok, F.lit(1))).alias("invalid"),
        )
        partials = materialise(self.layout.partials_of_rows(self.layout.assign(observed.filter(ok))))
        self.state.retire(version, partials)
        return self.layout.assign(rows.filter(ok)), partials, seen

    def step(self, step: Step) -> dict[str, DataFrame]:
        rows = self.time.to_inside(step.inputs[0])
        assigned, partials, seen = self._prepare(rows, step.version)
        step.wait_previous()
        epoch = step.version
        before, closed = self.watermark, self.closed_at
        late = Observation(f"{self.name} e{epoch} late")
        if closed is not None:
            counted = partials.observe(late, F.sum(F.when(F.col("end") <= F.lit(closed), F.col("_n")).otherwise(0)).alias("late"))
            partials = counted.filter(F.col("end") > F.lit(closed))
        merged = self._merge(partials, epoch)
        metrics = seen.get
        self.metrics["input_rows"] += int(metrics.get("rows") or 0)
        self.metrics["invalid_rows"] += int(metrics.get("invalid") or 0)
        if closed is not None:
            self.metrics["late_rows"] += int(late.get.get("late") or 0)
        if metrics.get("max_time") is not None:
            newest = int(metrics["max_time"])
            self.max_time = newest if self.max_time is None else max(self.max_time, newest)
        # Windows close at the watermark the epoch started with, after its rows
        # (Spark's order); the final epoch closes everything.
        closing = FINAL_WATERMARK if step.final else before
        self.closed_at = closing
        if self.max_time is not None:
            candidate = max(self.max_time - self.time.delay, LOWEST_WATERMARK)
            self.watermark = candidate if before is None else max(before, candidate)
        if step.final:
            self.watermark = FINAL_WATERMARK
        cutoff = self.log.cutoff(epoch, self.processor.policy) if self.log is not None else 0  # type: ignore[arg-type]
        affected = merged.unionByName(self._others(merged, closing, cutoff))
        classified = materialise(self.layout.classify(affected, epoch, closing, cutoff))
        self.state.retire(epoch, classified)
        grouped = self.layout.regroup(classified)
        changed = grouped.filter(F.size(F.col("windows")) > 0)
        deleted = grouped.filter(F.size(F.col("windows")) == 0).select(*self.spec.key)
        gone = self._expiring(merged, epoch, closing, step.final)
        if gone is not None:
            deleted = deleted.unionByName(gone.select(*self.spec.key))
        self.state.apply(changed, deleted, epoch)
        if self.log is not None:
            self.log.record(epoch, merged, classified, int(metrics.get("rows") or 0), self.marks())
        late_rows, invalid = self._late(rows, assigned, closed)
        shown = classified.filter(F.col(CLS) == "close") if self.spec.mode == "append" else classified.filter(F.col(UPDATED))
        out = self.time.to_outside(self.layout.results(shown, self.inside_output), *BOUNDS, *self.time_outputs)
        late_out = self.time.to_outside(late_rows.unionByName(invalid), self.spec.time, *BOUNDS)
        ports = {"out": out, "late": late_out}
        if self.spec.ttl is not None:
            ports[EXPIRED_PORT] = self._expired_rows(gone)
        return ports

    def _expiring(self, merged: DataFrame, epoch: int, closing: int | None, final: bool) -> DataFrame | None:
        """The state rows of the keys the ``ttl`` removes at ``epoch`` (materialised),
        or None: keys with no row this epoch (not in ``merged``) and no window closing
        at ``closing``, that are idle - with ``ttl=N``, their state unchanged since
        epoch ``epoch - N`` (no row, no window closed); with an event-time ttl, no
        row newer than ``closing`` minus the span (a window's ``last`` is the latest
        event time in it). The epoch that ends the input closes every window instead."""
        if final or (self.ttl is None and self.ttl_span is None):
            return None
        if self.ttl is not None:
            if epoch - self.ttl < 1:
                return None
            idle = f"{EPOCH} <= {epoch - self.ttl}"
        else:
            assert self.ttl_span is not None
            if closing is None or closing - self.ttl_span < LOWEST_WATERMARK:
                return None
            idle = f"array_max(transform({WINDOWS}, w -> w.{LAST})) <= {closing - self.ttl_span}"
        if closing is not None:
            idle += f" AND {MIN_END} > {closing}"  # a window closing now is emitted first; the key may expire later
        gone = materialise(self.state.expiring_where(idle, merged))
        self.state.retire(epoch, gone)  # read by this epoch's consumers; freed once it commits
        return gone

    def _expired_rows(self, gone: DataFrame | None) -> DataFrame:
        """The open windows of the keys that expired, as output rows (the columns of ``out``)."""
        if gone is None:
            return self.spark.createDataFrame([], self.output_schema)
        rows = self.layout.results(self.layout.exploded(gone), self.inside_output)
        return self.time.to_outside(rows, *BOUNDS, *self.time_outputs)

    def _merge(self, partials: DataFrame, epoch: int) -> DataFrame:
        """The touched keys' windows after the epoch's rows (materialised)."""
        joined = self.state.with_stored(self.layout.new_arrays(partials))
        merged = materialise(self.layout.merge(self.layout.exploded(joined)))
        self.state.retire(epoch, merged)
        return merged

    def _others(self, merged: DataFrame, closing: int | None, cutoff: int) -> DataFrame:
        """The windows of untouched keys that may close at watermark ``closing`` (or
        be checkpointed again)."""
        condition = f"{MIN_END} <= {closing}" if closing is not None else "false"
        if cutoff:
            condition += f" OR {MIN_FP} < {cutoff}"
        keys = list(self.spec.key)
        candidates = self.state.candidates(condition).join(merged.select(*keys).distinct(), keys, "left_anti")
        # A superseded row may have matched: only keys whose current row does are
        # rewritten (an idle key must not look changed to a ttl).
        current = self.state.with_stored(self.state.partitioned(candidates)).filter(f"_found AND ({condition})")
        return self.layout.stored_windows(current)

    def _late(self, rows: DataFrame, assigned: DataFrame, watermark: int | None) -> tuple[DataFrame, DataFrame]:
        """The late rows (window closed before this epoch) and the invalid ones,
        each with its reason; both counted when computed."""
        columns = self.input_columns
        invalid = rows.filter(~self.layout.valid()).select(
            *columns,
            F.lit(None).cast("long").alias("window_start"),
            F.lit(None).cast("long").alias("window_end"),
            self.layout.invalid_reason().alias("reason"),
        )
        if watermark is None:
            late = invalid.limit(0)
        else:
            late = self.layout.late_rows(assigned, columns, watermark, self.time.text)
        return late, invalid

    # -- state ----------------------------------------------------------------------------

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        if self.log is not None:
            return self.log.rows(epoch)
        rows = self.state.checkpoint(epoch, base)
        meta = self.spark.createDataFrame(
            [(epoch, True, True, *self.marks(), self.signature)],
            StructType(
                [
                    StructField(EPOCH, LongType(), False),
                    StructField(DELETED, rows.schema[DELETED].dataType, False),
                    StructField(META, rows.schema[DELETED].dataType, False),
                    StructField(WATERMARK, LongType(), True),
                    StructField(CLOSED_AT, LongType(), True),
                    StructField(MAX_TIME, LongType(), True),
                    StructField(SPEC, StringType(), True),
                ]
            ),
        )
        return rows.unionByName(meta, allowMissingColumns=True)

    def load_state(self, rows: DataFrame, epoch: int) -> None:
        raise GraphError(f"window processor {self.name!r} cannot start from a given state: it starts empty")

    def carry_over(self, rows: DataFrame) -> DataFrame:
        """The checkpoint's watermark row records the window's settings (its
        ``watermark_delay`` may have changed): this version's."""
        return rows.withColumn(SPEC, F.when(F.col(META), F.lit(self.signature)).otherwise(F.col(SPEC)))

    def chain_kind(self, epoch: int, base: bool) -> ChainKind:
        if self.log is not None:
            return self.log.kind(epoch)
        return super().chain_kind(epoch, base)

    def restore(self, chain: Chain, epoch: int) -> None:
        started = time.perf_counter()
        kinds = {ChainKind.parse(kind) for t, kind, _ in chain if t == epoch}
        cec = any(isinstance(kind, Cec) for kind in kinds)
        if cec != self.cec or not kinds:
            found = ", ".join(sorted(map(str, kinds))) or "none"
            raise GraphError(
                f"window processor {self.name!r}: its state at epoch {epoch} was written under another policy (checkpoint "
                f"kind {found}; this run uses {self.processor.policy.name}). Restart with the policy that wrote it, "
                "or use a new storage root"
            )
        if self.log is not None:
            self.watermark, self.closed_at, self.max_time = self.log.restore(chain, epoch)
        else:
            self.state.restore(chain, epoch, self.owner)
            self.watermark, self.closed_at, self.max_time = self._restored_meta(chain, epoch)
        self.metrics["restore_seconds"] = time.perf_counter() - started

    def marks(self) -> tuple[int | None, int | None, int | None]:
        """The watermark, the watermark windows last closed at, the greatest event time."""
        return self.watermark, self.closed_at, self.max_time

    def _restored_meta(self, chain: Chain, epoch: int) -> tuple[int | None, int | None, int | None]:
        paths = [f.path for t, _, files in chain if t == epoch for f in files]
        if not paths:
            raise OperatorInvariantError(f"window processor {self.name!r} has no checkpoint at epoch {epoch} to restore")
        meta = self.spark.read.parquet(*paths).filter(f"{META} IS NOT NULL AND {META}").select(WATERMARK, CLOSED_AT, MAX_TIME, SPEC).collect()
        if len(meta) != 1:
            raise GraphError(
                f"window processor {self.name!r}: its checkpoint at epoch {epoch} holds {len(meta)} watermark rows, "
                "expected 1 (the checkpoint is damaged; restart from a new storage root or an older copy)"
            )
        check_signature(self.name, meta[0][SPEC], self.signature)
        return meta[0][WATERMARK], meta[0][CLOSED_AT], meta[0][MAX_TIME]

    def catch_up_from(self) -> int | None:
        return self.log.catch_up_from if self.log is not None else None

    def catch_up(self, step: Step) -> None:
        assert self.log is not None
        rows = self.time.to_inside(step.inputs[0])
        self.log.catch_up(step.epoch, self.layout.assign(rows.filter(self.layout.valid())))

    def revert(self, epoch: int, checkpointed: int) -> bool:
        return False  # the watermark and the CEC log move with each epoch too

    def held(self) -> list[DataFrame] | None:
        pending = list(self.log.pending.values()) if self.log is not None else []
        return [*self.state.held_runs(), *pending]

    def reset(self) -> None:
        super().reset()
        self.watermark = self.closed_at = self.max_time = None
        if self.log is not None:
            self.log.reset()

    def describe(self) -> dict[str, Any]:
        """The watermark and the counters (for status and the bench)."""
        extra = self.log.metrics if self.log is not None else {}
        return {"watermark": self.watermark, "closed_at": self.closed_at, "max_time": self.max_time, **self.metrics, **extra}

