"""The DataFrame steps of a window operator (:mod:`falkirk.operators.window`).

The state holds, per key, the array of its open windows (``windows``), each a struct
of ``start``, ``end``, ``last`` (latest event time in it), ``fp`` (the epoch of its
last footprint under CEC, the epoch it opened otherwise) and the partial aggregates;
plus ``min_end`` and ``min_fp`` of the array, so the keys with windows to close or
to checkpoint are found by a filter over the state's runs in place.

An epoch's rows become per-window partials (:func:`partials`), are merged with the
stored windows of their keys (:func:`merge_fixed`, :func:`merge_sessions`), then
every window of the keys concerned is classified against the new watermark
(:func:`classify`) and regrouped into the keys' new arrays (:func:`regroup`). Every
step but the first runs on data partitioned by key, as the state is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from falkirk.graph import GraphError
from falkirk.graph.durations import micros
from falkirk.graph.windows import Session, Sliding, Tumbling, WindowShape, WindowSpec
from falkirk.operators.aggregate import combine_sql, epoch_partials, final_sql, partials_of
from falkirk.operators.event_time import EventTime, shape_text
from falkirk.operators.stateful import plain_values
from falkirk.spark.frames import quote

START, END, LAST, FP = "start", "end", "last", "fp"
#: A window's rows, kept when a user function computes its result.
ROWS = "_rows"
#: The footprint the window's identity had stored (null: a new identity).
PREV_FP = "_prev_fp"
FRESH, UPDATED, EXISTED, RETIRED, CLS = "_fresh", "_updated", "_existed", "_retired", "_cls"
TS = "_ts"
WINDOWS, MIN_END, MIN_FP = "windows", "min_end", "min_fp"
RETIRED_TYPE = ArrayType(StructType([StructField(START, LongType()), StructField(FP, LongType())]))

#: The watermark of the epoch that ends the input: past every window.
FINAL_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class Layout:
    """Columns of one window operator: keys, event time, partial aggregates."""

    keys: tuple[str, ...]
    time: str
    shape: WindowShape
    aggregates: dict[str, tuple[str, str | None]]
    #: (partial column, type, combine rule) of every aggregate
    partials: tuple[tuple[str, DataType, str], ...]
    #: The input's schema (a window with a user function keeps its rows: ``_rows``).
    input_schema: StructType = field(default_factory=StructType)
    fn: Callable[..., Any] | None = None

    @classmethod
    def of(
        cls,
        keys: Sequence[str],
        time: str,
        shape: WindowShape,
        aggregates: dict[str, tuple[str, str | None]],
        schema: StructType,
        fn: Callable[..., Any] | None = None,
    ) -> Layout:
        parts: list[tuple[str, DataType, str]] = []
        for out, (func, col) in aggregates.items():
            dtype = schema[col].dataType if col is not None else None
            parts += partials_of(out, func, dtype)
        if fn is not None:
            parts.append((ROWS, ArrayType(StructType([StructField(f.name, f.dataType) for f in schema.fields])), "concat"))
        return cls(tuple(keys), time, shape, dict(aggregates), tuple(parts), schema, fn)

    @property
    def names(self) -> list[str]:
        return [n for n, _, _ in self.partials]

    @property
    def element(self) -> StructType:
        """A window as the state stores it."""
        fields = [StructField(START, LongType()), StructField(END, LongType()), StructField(LAST, LongType()), StructField(FP, LongType())]
        return StructType(fields + [StructField(n, t) for n, t, _ in self.partials])

    def state_schema(self, input_schema: StructType) -> StructType:
        return StructType(
            [input_schema[k] for k in self.keys]
            + [StructField(WINDOWS, ArrayType(self.element)), StructField(MIN_END, LongType()), StructField(MIN_FP, LongType())]
        )

    @property
    def sessions(self) -> bool:
        return isinstance(self.shape, Session)

    # -- an epoch's rows ------------------------------------------------------------

    def assign(self, rows: DataFrame) -> DataFrame:
        """Valid rows with their event time ``_ts`` and ``window_start`` and
        ``window_end``: one row per window a row falls in."""
        ts = F.col(self.time).cast("long")
        out = rows.withColumn(TS, ts)
        shape = self.shape  # in the units computed with (integers: see falkirk.operators.event_time)
        if isinstance(shape, Tumbling):
            size = micros(shape.size)
            start = F.col(TS) - F.pmod(F.col(TS), F.lit(size))
            return out.withColumn("window_start", start).withColumn("window_end", F.col("window_start") + size)
        if isinstance(shape, Sliding):
            size, slide = micros(shape.size), micros(shape.slide)
            last = F.col(TS) - F.pmod(F.col(TS), F.lit(slide))
            first = last - (shape.windows_per_row - 1) * slide
            starts = F.filter(F.sequence(first, last, F.lit(slide).cast("long")), lambda s: s > F.col(TS) - size)
            return out.withColumn("window_start", F.explode(starts)).withColumn("window_end", F.col("window_start") + size)
        assert isinstance(shape, Session)
        return out.withColumn("window_start", F.col(TS)).withColumn("window_end", F.col(TS) + micros(shape.gap))

    def valid(self) -> Column:
        """Rows that can be windowed: an event time and every key column."""
        cond = F.col(self.time).isNotNull()
        for k in self.keys:
            cond = cond & F.col(k).isNotNull()
        return cond

    def invalid_reason(self) -> Column:
        missing_key = F.lit(False)
        for k in self.keys:
            missing_key = missing_key | F.col(k).isNull()
        return F.when(F.col(self.time).isNull(), F.lit(f"no event time ({self.time} is null)")).when(
            missing_key, F.lit(f"a key column ({', '.join(self.keys)}) is null")
        )

    def partials_of_rows(self, assigned: DataFrame) -> DataFrame:
        """Per key and window (sessions: per key and event time), the partial
        aggregates of the rows: keys, start, end, last, partials."""
        group = [*self.keys, "window_start"] if not self.sessions else [*self.keys, TS]
        rows = [F.collect_list(F.struct(*[F.col(f.name) for f in self.input_schema.fields])).alias(ROWS)] if self.fn else []
        agg = assigned.groupBy(*group).agg(
            F.max("window_end").alias(END),
            F.max(TS).alias(LAST),
            *epoch_partials(assigned.schema, self.aggregates),
            *rows,
            F.count(F.lit(1)).alias("_n"),
        )
        if self.sessions:
            return agg.withColumn(START, F.col(TS)).drop(TS)
        return agg.withColumnRenamed("window_start", START)

    def new_arrays(self, partials: DataFrame) -> DataFrame:
        """Per key, the array of its new partial windows (``new``), sorted by key
        within partitions (the groupBy partitions by key as the state does)."""
        element = F.struct(
            F.col(START), F.col(END), F.col(LAST), F.lit(None).cast("long").alias(FP), *[F.col(n) for n in self.names]
        )
        return partials.groupBy(*self.keys).agg(F.collect_list(element).alias("new")).sortWithinPartitions(*self.keys)

    def exploded(self, joined: DataFrame) -> DataFrame:
        """``joined`` (keys, ``new``, stored ``windows``) as one row per window
        element: the stored ones and the new ones (``_fresh``)."""
        fields = [START, END, LAST, FP, *self.names]

        def tag(fresh: bool):  # type: ignore[no-untyped-def]
            return lambda x: F.struct(*[x[f].alias(f) for f in fields], F.lit(fresh).alias(FRESH))

        new = F.transform(F.coalesce(F.col("new"), F.array()), tag(True)) if "new" in joined.columns else F.array()
        stored = F.transform(F.coalesce(F.col(WINDOWS), F.array()), tag(False))
        both = F.concat(new, stored) if "new" in joined.columns else stored
        return joined.select(*self.keys, F.explode(both).alias("_w")).select(*self.keys, "_w.*")

    # -- merging ----------------------------------------------------------------------

    def _combined(self, only: Column | None = None) -> list[Column]:
        """Partials combined over a group's elements (those where ``only`` holds)."""
        out: list[Column] = []
        for name, _, rule in self.partials:
            col = F.col(name) if only is None else F.when(only, F.col(name))
            if rule == "concat":  # a window's rows: every element's, in one array
                out.append(F.flatten(F.collect_list(col)).alias(name))
                continue
            agg = {"add": F.sum, "min": F.min, "max": F.max}[rule](col)
            out.append(agg.alias(name))
        return out

    def merge(self, elements: DataFrame) -> DataFrame:
        """The touched keys' windows after the epoch: keys, start, end, last, ``fp``
        (null: needs a new footprint - a new window, or sessions merged), partials,
        ``_updated`` (the epoch's rows are in it), ``_existed`` (its identity was
        stored), ``_prev_fp`` (the footprint that identity had) and ``_retired``
        (sessions: stored windows merged into it, gone)."""
        if not self.sessions:
            return elements.groupBy(*self.keys, START).agg(
                F.max(END).alias(END),
                F.max(LAST).alias(LAST),
                F.min(FP).alias(FP),
                *self._combined(),
                F.max(FRESH).alias(UPDATED),
                F.max(F.col(FP).isNotNull()).alias(EXISTED),
                F.min(FP).alias(PREV_FP),
                F.array().cast(RETIRED_TYPE).alias(RETIRED),
            )
        islands = self._islands(elements)
        stored = ~F.col(FRESH)
        grouped = islands.groupBy(*self.keys, "_island").agg(
            F.min(START).alias(START),
            F.max(END).alias(END),
            F.max(LAST).alias(LAST),
            *self._combined(),
            F.max(FRESH).alias(UPDATED),
            F.sum(F.when(stored, 1).otherwise(0)).alias("_n_stored"),
            F.min(F.when(stored, F.col(START))).alias("_stored_start"),
            F.min(FP).alias("_stored_fp"),
            F.collect_list(F.when(stored, F.struct(F.col(START), F.col(FP)))).alias("_stored"),
        )
        same = (F.col("_n_stored") == 1) & (F.col("_stored_start") == F.col(START))
        return grouped.select(
            *self.keys,
            START,
            END,
            LAST,
            F.when(same, F.col("_stored_fp")).alias(FP),
            *self.names,
            UPDATED,
            F.exists("_stored", lambda s: s[START] == F.col(START)).alias(EXISTED),
            F.try_element_at(F.filter("_stored", lambda s: s[START] == F.col(START)), F.lit(1))[FP].alias(PREV_FP),
            F.filter("_stored", lambda s: s[START] != F.col(START)).cast(RETIRED_TYPE).alias(RETIRED),
        )

    def _islands(self, elements: DataFrame) -> DataFrame:
        """Sessions: ``_island`` numbers the runs of overlapping or touching
        intervals ``[start, end)`` per key (gaps and islands, on data partitioned
        by key)."""
        order = Window.partitionBy(*self.keys).orderBy(START, END)
        before = F.max(END).over(order.rowsBetween(Window.unboundedPreceding, -1))
        # Touching intervals merge: rows exactly ``gap`` apart are one session (as in Spark).
        begins = F.when(before.isNull() | (F.col(START) > before), 1).otherwise(0)
        marked = elements.withColumn("_begins", begins)
        return marked.withColumn("_island", F.sum("_begins").over(order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))

    def catch_up(self, elements: DataFrame, epoch: int) -> DataFrame:
        """Recovery's replay of ``epoch`` into the eventual checkpoint: a stored
        window takes the epoch's rows that fall in it only if its footprint is older
        than the epoch (a later footprint holds them already); rows falling in no
        stored window belong to windows that closed, and are ignored. Returns every
        stored window of the keys, footprints unchanged."""
        stored, fresh = ~F.col(FRESH), F.col(FRESH)
        group = [*self.keys, START] if not self.sessions else [*self.keys, "_island"]
        source = elements if not self.sessions else self._islands(elements)
        grouped = source.groupBy(*group).agg(
            F.sum(F.when(stored, 1).otherwise(0)).alias("_n_stored"),
            F.min(F.when(stored, F.col(START))).alias("_s_start"),
            F.min(START).alias("_a_start"),
            F.max(F.when(stored, F.col(END))).alias("_s_end"),
            F.max(END).alias("_a_end"),
            F.max(F.when(stored, F.col(LAST))).alias("_s_last"),
            F.max(LAST).alias("_a_last"),
            F.min(FP).alias(FP),
            *[c.alias("_s_" + n) for c, n in zip(self._combined(stored), self.names, strict=True)],
            *[c.alias("_f_" + n) for c, n in zip(self._combined(fresh), self.names, strict=True)],
        )
        kept = grouped.filter(F.col("_n_stored") > 0)
        if self.sessions:
            kept = kept.withColumn(
                "_n_stored",
                F.when(F.col("_n_stored") > 1, F.raise_error(F.lit("CEC recovery: replayed rows bridge two windows of the eventual checkpoint; the log is inconsistent"))).otherwise(F.col("_n_stored")),
            )
        takes = F.col(FP) < F.lit(epoch)
        picked = [F.when(takes, F.col(f"_a_{c}")).otherwise(F.col(f"_s_{c}")).alias(c) for c in (START, END, LAST)]
        if not self.sessions:
            picked[0] = F.col(START)
            picked[1] = F.col("_s_end").alias(END)
        combined = [
            F.when(takes, F.expr(_combine(rule, f"_s_{n}", f"_f_{n}"))).otherwise(F.col(f"_s_{n}")).alias(n)
            for n, _, rule in self.partials
        ]
        return kept.select(*self.keys, *picked, F.col(FP), *combined)

    # -- after the watermark moved ------------------------------------------------------

    def classify(self, windows: DataFrame, epoch: int, watermark: int | None, cutoff: int) -> DataFrame:
        """``_cls`` of each window: ``close`` (its end is at or below the watermark),
        ``open`` (it needs a new footprint), ``check`` (its footprint is before
        ``cutoff``: checkpointed again), ``keep``; and ``fp_new``."""
        closes = F.lit(False) if watermark is None else F.col(END) <= F.lit(watermark)
        cls = (
            F.when(closes, F.lit("close"))
            .when(F.col(FP).isNull(), F.lit("open"))
            .when(F.lit(cutoff > 0) & (F.col(FP) < F.lit(cutoff)), F.lit("check"))
            .otherwise(F.lit("keep"))
        )
        marked = windows.withColumn(CLS, cls)
        refreshed = F.col(CLS).isin("open", "check")
        return marked.withColumn("fp_new", F.when(refreshed, F.lit(epoch).cast("long")).otherwise(F.col(FP)))

    def regroup(self, windows: DataFrame, fp: str = "fp_new", keep: Column | None = None) -> DataFrame:
        """Per key: its remaining windows (``keep``, default: not closing) as the
        state's array, sorted by start, with ``min_end`` and ``min_fp``; keys left
        with none have an empty array (to delete)."""
        keep = F.col(CLS) != "close" if keep is None else keep
        element = F.struct(F.col(START), F.col(END), F.col(LAST), F.col(fp).alias(FP), *[F.col(n) for n in self.names])
        return windows.groupBy(*self.keys).agg(
            F.array_sort(F.collect_list(F.when(keep, element))).alias(WINDOWS),
            F.min(F.when(keep, F.col(END))).alias(MIN_END),
            F.min(F.when(keep, F.col(fp))).alias(MIN_FP),
        )

    def stored_windows(self, joined: DataFrame) -> DataFrame:
        """Stored windows (from :meth:`KeyedState.with_stored`) in :meth:`merge`'s
        columns: not updated, existing, nothing retired."""
        return self.exploded(joined.filter("_found")).select(
            *self.keys,
            START,
            END,
            LAST,
            FP,
            *self.names,
            F.lit(False).alias(UPDATED),
            F.lit(True).alias(EXISTED),
            F.col(FP).alias(PREV_FP),
            F.array().cast(RETIRED_TYPE).alias(RETIRED),
        )

    def results(self, windows: DataFrame, output: StructType) -> DataFrame:
        """Windows as output rows (``output``): keys, window_start, window_end, and
        the aggregates or the user function's columns."""
        if self.fn is not None:
            return window_function_rows(windows.select(*self.keys, START, END, ROWS), self.keys, self.input_schema, self.fn, output)
        return windows.selectExpr(
            *map(quote, self.keys),
            f"{START} AS window_start",
            f"{END} AS window_end",
            *[final_sql(out, func) for out, (func, _) in self.aggregates.items()],
        )

    def late_rows(self, assigned: DataFrame, input_columns: Sequence[str], watermark: int, text: Callable[[str], Column]) -> DataFrame:
        """Rows whose window had closed (its end at or below ``watermark``), with the
        window and a reason (times as ``text`` of a SQL expression writes them)."""
        if watermark >= FINAL_WATERMARK:  # no time to print: every window closed when the input ended
            why = F.lit("the input was finished (run(finish=True)), which closed every window")
        else:
            why = F.format_string("watermark %s", text(f"{watermark}L"))
        reason = F.format_string("late: window [%s, %s) had closed (%s)", text("window_start"), text("window_end"), why)
        late = assigned.filter(F.col("window_end") <= F.lit(watermark))
        return late.select(*map(quote, input_columns), "window_start", "window_end", reason.alias("reason"))


def _combine(rule: str, old: str, new: str) -> str:
    """SQL combining two partials (``concat``: two windows' rows)."""
    if rule == "concat":
        return f"concat(coalesce({old}, array()), coalesce({new}, array()))"
    return combine_sql(rule, old, new)


def window_function_rows(
    windows: DataFrame, keys: Sequence[str], input_schema: StructType, fn: Callable[..., Any], output: StructType
) -> DataFrame:
    """``fn(key, window_start, window_end, rows)`` per window (``windows``: keys,
    start, end and ``_rows``), one Python call per window, in Spark's Python workers
    (``mapInArrow``): the key, the window, and the rows ``fn`` returns."""
    names = [f.name for f in input_schema.fields]
    own = [f.name for f in output.fields[len(keys) + 2 :]]
    arrow_schema = to_arrow_schema(output)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            table: dict[str, list[Any]] = {f.name: [] for f in output.fields}
            data = batch.to_pydict()
            for i in range(batch.num_rows):
                key = tuple(data[k][i] for k in keys)
                frame = pd.DataFrame(data[ROWS][i] or [], columns=names)
                result = fn(key[0] if len(key) == 1 else key, data[START][i], data[END][i], frame)
                n = 0 if result is None else len(result)
                missing = [c for c in own if n and c not in result.columns]
                if missing:
                    raise ValueError(f"the window function returned no column {missing} (output_schema: {own})")
                for k, value in zip(keys, key, strict=True):
                    table[k] += [value] * n
                table["window_start"] += [data[START][i]] * n
                table["window_end"] += [data[END][i]] * n
                for c in own:
                    table[c] += plain_values(result[c]) if n else []
            yield pa.RecordBatch.from_pydict(table, schema=arrow_schema)

    return windows.mapInArrow(run, output)


def late_schema(input_schema: StructType, bound: DataType | None = None) -> StructType:
    """A late row: the input's columns, its window (``bound``: the bounds' type) and a reason."""
    bound = bound or LongType()
    return StructType(
        [*input_schema.fields, StructField("window_start", bound), StructField("window_end", bound), StructField("reason", StringType())]
    )


def signature(spec: WindowSpec, cec: bool, time: EventTime) -> str:
    """The settings a window processor's stored state depends on, as text."""
    fn = getattr(spec.fn, "__qualname__", repr(spec.fn)) if spec.fn is not None else None
    parts = [
        shape_text(spec, time),
        f"key={list(spec.key)}",
        f"time={spec.time}",
        f"delay={time.delay}",
        f"mode={spec.mode}",
        f"aggregates={sorted(spec.aggregates.items())}",
        f"fn={fn}" if fn else "",
        "cec" if cec else "checkpoints",
    ]
    return " ".join(p for p in parts if p)


def check_signature(name: str, stored: str | None, current: str) -> None:
    """Refuse to restore state written with other window settings (its windows,
    watermark and partials would mean something else)."""
    if stored is not None and stored != current:
        raise GraphError(
            f"window processor {name!r}: its stored state was written with other settings ({stored}); this run has "
            f"({current}). Restart with the original settings, or use a new storage root"
        )

