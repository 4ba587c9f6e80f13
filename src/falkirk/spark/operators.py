"""Keyed stateful operators as Spark jobs: built-in aggregates and user functions.

Both merge one epoch's rows into :class:`~falkirk.spark.state.KeyedState` and emit
only what the epoch changed. Records stay in Spark: aggregates are JVM expressions;
user functions run per key in pandas through ``cogroup().applyInPandas``, seeing
only the keys present in the epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StringType, StructField, StructType

from falkirk.spark.state import EPOCH, KeyedState

AggSpec = Mapping[str, tuple[str, str | None]]


def _partials(out: str, func: str, dtype: DataType | None) -> list[tuple[str, DataType, str]]:
    """(state column, type, combine rule) for one aggregate."""
    if func == "count":
        return [(f"{out}__count", LongType(), "add")]
    if func == "avg":
        return [(f"{out}__sum", DoubleType(), "add"), (f"{out}__count", LongType(), "add")]
    if func == "sum":
        sum_type = LongType() if dtype is not None and dtype.typeName() in ("integer", "long", "short", "byte") else DoubleType()
        return [(f"{out}__sum", sum_type, "add")]
    assert dtype is not None
    return [(f"{out}__{func}", dtype, func)]


def aggregate_state_schema(input_schema: StructType, keys: Sequence[str], aggregates: AggSpec) -> StructType:
    """Key columns then the partial aggregates kept per key."""
    fields = [input_schema[k] for k in keys]
    for out, (func, col) in aggregates.items():
        dtype = input_schema[col].dataType if col is not None else None
        fields += [StructField(name, t, True) for name, t, _ in _partials(out, func, dtype)]
    return StructType(fields)


def _epoch_partial(func: str, col: str | None, name: str, t: DataType) -> Column:
    if func == "count":
        return (F.count(F.col(col)) if col else F.count(F.lit(1))).cast(t).alias(name)
    if name.endswith("__count"):  # avg
        return F.count(F.col(col)).cast(t).alias(name)  # type: ignore[arg-type]
    if name.endswith("__sum"):
        return F.sum(F.col(col)).cast(t).alias(name)  # type: ignore[arg-type]
    agg = {"min": F.min, "max": F.max}.get(func)
    if agg is not None:
        return agg(F.col(col)).alias(name)  # type: ignore[arg-type]
    return (F.first if func == "first" else F.last)(F.col(col), ignorenulls=True).alias(name)  # type: ignore[arg-type]


def _combine(rule: str, old: Column, new: Column) -> Column:
    if rule == "add":
        return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(old + new)
    if rule == "min":
        return F.least(old, new)
    if rule == "max":
        return F.greatest(old, new)
    if rule == "first":
        return F.coalesce(old, new)
    return F.coalesce(new, old)  # last


def _final(out: str, func: str) -> Column:
    if func == "count":
        return F.coalesce(F.col(f"{out}__count"), F.lit(0)).alias(out)
    if func == "avg":
        return (F.col(f"{out}__sum") / F.col(f"{out}__count")).cast("double").alias(out)
    if func == "sum":
        return F.col(f"{out}__sum").alias(out)
    return F.col(f"{out}__{func}").alias(out)


def aggregate_step(state: KeyedState, batch: DataFrame, aggregates: AggSpec, epoch: int) -> DataFrame:
    """Merge ``batch`` into the running aggregates; return, for every key in the
    batch, the key and its updated aggregates."""
    keys = list(state.keys)
    rules: list[tuple[str, str]] = []
    partial_cols: list[Column] = []
    for out, (func, col) in aggregates.items():
        dtype = batch.schema[col].dataType if col is not None else None
        for name, t, rule in _partials(out, func, dtype):
            partial_cols.append(_epoch_partial(func, col, name, t))
            rules.append((name, rule))
    delta = batch.groupBy(*keys).agg(*partial_cols)
    old = state.df.select(*keys, *[F.col(n).alias(f"o_{n}") for n, _ in rules], EPOCH)
    new = delta.select(*keys, *[F.col(n).alias(f"n_{n}") for n, _ in rules], F.lit(True).alias("_touched"))
    merged = old.join(new, keys, "full_outer").select(
        *keys,
        *[_combine(rule, F.col(f"o_{n}"), F.col(f"n_{n}")).alias(n) for n, rule in rules],
        F.when(F.col("_touched"), F.lit(epoch)).otherwise(F.col(EPOCH)).cast("long").alias(EPOCH),
    )
    state.replace(merged, None, epoch)
    return state.df.filter(F.col(EPOCH) == epoch).select(*keys, *[_final(o, f) for o, (f, _) in aggregates.items()])


KIND = "_falkirk_kind"


def _plain(series: pd.Series) -> list[Any]:
    return [None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in series]


def stateful_step(
    state: KeyedState,
    batch: DataFrame,
    fn: Callable[..., Any],
    output_schema: StructType,
    epoch: int,
    on_epoch_end: Callable[..., Any] | None = None,
) -> DataFrame:
    """Run ``fn(key, rows, state) -> (outputs, new_state)`` for every key in ``batch``,
    and ``on_epoch_end(key, state, epoch)`` for every other key holding state (see
    :meth:`falkirk.graph.Stream.stateful`); update the state; return the outputs."""
    keys = list(state.keys)
    values = list(state.values)
    out_names = [f.name for f in output_schema.fields]
    combined = StructType(
        [StructField(KIND, StringType(), False)]
        + [StructField(f"k_{f.name}", f.dataType, True) for f in state.schema.fields if f.name in keys]
        + [StructField(f"o_{f.name}", f.dataType, True) for f in output_schema.fields]
        + [StructField(f"s_{f.name}", state.schema[f.name].dataType, True) for f in state.schema.fields if f.name in values]
    )
    columns = combined.fieldNames()

    def run(key: tuple[Any, ...], rows: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
        user_key = key[0] if len(key) == 1 else key
        current = stored[values].reset_index(drop=True)
        if on_epoch_end is not None and rows.empty:  # a stored key without new rows
            outputs, new_state = on_epoch_end(user_key, current, epoch)
        else:
            outputs, new_state = fn(user_key, rows, current)
        # Plain lists with None for missing values: pandas extension dtypes (Int64...)
        # do not survive PySpark's Arrow conversion.
        table: dict[str, list[Any]] = {c: [] for c in columns}
        n_out = 0 if outputs is None else len(outputs)
        n_state = 0 if new_state is None else len(new_state)
        if n_state > 1:
            raise ValueError(f"state of key {key!r} must be one row, got {n_state}")
        table[KIND] = ["out"] * n_out + ["state"] * n_state
        for i, k in enumerate(keys):
            table[f"k_{k}"] = [None] * n_out + [key[i]] * n_state
        for c in out_names:
            table[f"o_{c}"] = (_plain(outputs[c]) if n_out else []) + [None] * n_state
        for c in values:
            table[f"s_{c}"] = [None] * n_out + (_plain(new_state[c]) if n_state else [])
        return pd.DataFrame(table, columns=columns)

    touched = batch.select(*keys).distinct()
    if on_epoch_end is not None:  # every stored key is notified
        touched = touched.unionByName(state.df.select(*keys)).distinct()
    stored = state.df.join(touched, keys, "left_semi").select(*keys, *values)
    result = (
        batch.groupBy(*keys).cogroup(stored.groupBy(*keys)).applyInPandas(run, combined).localCheckpoint(eager=True)
    )
    new_rows = result.filter(F.col(KIND) == "state").select(
        *[F.col(f"k_{k}").alias(k) for k in keys], *[F.col(f"s_{v}").alias(v) for v in values]
    )
    state.retire(epoch, result)  # read by this epoch's consumers; freed once it commits
    kept = state.df.join(touched, keys, "left_anti")
    deleted = touched.join(new_rows.select(*keys), keys, "left_anti")
    state.replace(kept.unionByName(new_rows.withColumn(EPOCH, F.lit(epoch).cast("long"))), deleted, epoch)
    return result.filter(F.col(KIND) == "out").select(*[F.col(f"o_{c}").alias(c) for c in out_names])
