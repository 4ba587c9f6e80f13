"""``stateful``: a user function with per-key state, run in pandas through Spark.

Each epoch, ``fn(key, rows, state) -> (outputs, new_state)`` runs for every key in
the epoch (or, vectorized, ``fn(rows, state)`` once per partition), in one Python
call per partition (``mapInArrow``), seeing only the keys present in the epoch; the
new states are merged into :class:`~falkirk.spark.state.KeyedState`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from falkirk.graph import GraphError
from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import EXPIRED_PORT, StatefulSpec
from falkirk.operators.base import Step, require, state_columns
from falkirk.operators.keyed import KeyedOperator, check_ttl_scope, ttl_setting
from falkirk.spark.frames import empty, quote
from falkirk.spark.materialise import materialise
from falkirk.spark.state import KeyedState

KIND = "_falkirk_kind"
ROW = "_falkirk_row"
FOUND = "_found"


def plain_values(series: pd.Series) -> list[Any]:
    """Plain Python values with None for missing ones (arrays become lists)."""
    out: list[Any] = []
    for v in series:
        if isinstance(v, (list, tuple, np.ndarray)):
            out.append([x.item() if hasattr(x, "item") else x for x in v])
        elif v is None or pd.isna(v):
            out.append(None)
        else:
            out.append(v.item() if hasattr(v, "item") else v)
    return out


def stateful_prepare(state: KeyedState, batch: DataFrame, epoch: int) -> DataFrame:
    """The first half of an epoch of a stateful operator, which needs nothing of the
    state: the epoch's rows laid out like the state runs (hash-partitioned by key -
    the step's one shuffle - and sorted by key), materialised; it overlaps the
    previous epoch's merge."""
    rows = materialise(state.partitioned(batch))
    state.retire(epoch, rows)  # read by this epoch's merge; freed once it commits
    return rows


def stateful_merge(
    state: KeyedState,
    rows: DataFrame,
    fn: Callable[..., Any],
    output_schema: StructType,
    epoch: int,
    on_epoch_end: Callable[..., Any] | None = None,
    vectorized: bool = False,
    *,
    time: Any = None,
    ttl: int | None = None,
) -> tuple[DataFrame, DataFrame | None]:
    """The second half: run ``fn(key, rows, state) -> (outputs, new_state)`` for
    every key in ``rows`` (from :func:`stateful_prepare`), or, ``vectorized``,
    ``fn(rows, state)`` once per partition for all its keys, and
    ``on_epoch_end(key, state, time)`` for every other key holding state (see
    :meth:`falkirk.graph.Stream.stateful`); update the state, as version ``epoch``;
    return the outputs. ``time`` (default ``epoch``) is what ``on_epoch_end`` is
    told: the epoch, or ``(epoch, iteration)`` inside a loop.

    Every row is joined in place with its key's stored state (both sides are
    partitioned by key already: nothing is shuffled; with ``on_epoch_end`` it is a
    full outer join with all of the state, O(state)); each partition then runs in
    one Python call (``mapInArrow``) that hands ``fn`` its keys' rows and states.
    Spark's own per-group machinery (``cogroup().applyInPandas``) costs about 5 ms
    per key here; this costs what ``fn`` costs."""
    keys = list(state.keys)
    values = list(state.values)
    row_cols = list(rows.columns)
    out_names = [f.name for f in output_schema.fields]
    combined = StructType(
        [StructField(KIND, StringType(), False)]
        + [StructField(f"k_{f.name}", f.dataType, True) for f in state.schema.fields if f.name in keys]
        + [StructField(f"o_{f.name}", f.dataType, True) for f in output_schema.fields]
        + [StructField(f"s_{f.name}", state.schema[f.name].dataType, True) for f in state.schema.fields if f.name in values]
    )
    columns = combined.fieldNames()
    arrow_schema = to_arrow_schema(combined)

    def run(key: tuple[Any, ...], rows: pd.DataFrame, stored: pd.DataFrame, table: dict[str, list[Any]]) -> None:
        user_key = key[0] if len(key) == 1 else key
        current = stored[values].reset_index(drop=True)
        if on_epoch_end is not None and rows.empty:  # a stored key without new rows
            outputs, new_state = on_epoch_end(user_key, current, epoch if time is None else time)
        else:
            outputs, new_state = fn(user_key, rows.reset_index(drop=True), current)
        # Plain lists with None for missing values: pandas extension dtypes (Int64...)
        # do not survive the conversion to Arrow.
        n_out = 0 if outputs is None else len(outputs)
        n_state = 0 if new_state is None else len(new_state)
        if n_state > 1:
            raise ValueError(f"state of key {key!r} must be one row, got {n_state}")
        # A key that had state and keeps none is deleted (a tombstone for checkpoints).
        n_key = n_state or int(len(stored) > 0)
        table[KIND] += ["out"] * n_out + (["state"] * n_state if n_state else ["deleted"] * n_key)
        for i, k in enumerate(keys):
            table[f"k_{k}"] += [None] * n_out + [key[i]] * n_key
        for c in out_names:
            table[f"o_{c}"] += (plain_values(outputs[c]) if n_out else []) + [None] * n_key
        for c in values:
            table[f"s_{c}"] += [None] * n_out + (plain_values(new_state[c]) if n_state else [None] * n_key)

    def run_vectorized(rows: pd.DataFrame, stored: pd.DataFrame, table: dict[str, list[Any]]) -> None:
        outputs, new_state = fn(rows.reset_index(drop=True), stored.reset_index(drop=True))
        n_out = 0 if outputs is None else len(outputs)
        if new_state is None:
            new_state = stored.iloc[0:0]
        missing = [c for c in (*keys, *values) if c not in new_state.columns]
        if missing:
            raise ValueError(f"the new state must have columns {[*keys, *values]}; {missing} are missing")
        if new_state.duplicated(keys).any():
            raise ValueError("the new state has several rows for one key")
        kept = set(new_state[keys].itertuples(index=False, name=None))
        gone = [k for k in stored[keys].itertuples(index=False, name=None) if k not in kept]
        n_state = len(new_state)
        table[KIND] += ["out"] * n_out + ["state"] * n_state + ["deleted"] * len(gone)
        for i, k in enumerate(keys):
            table[f"k_{k}"] += [None] * n_out + plain_values(new_state[k]) + [g[i] for g in gone]
        for c in out_names:
            table[f"o_{c}"] += (plain_values(outputs[c]) if n_out else []) + [None] * (n_state + len(gone))
        for c in values:
            table[f"s_{c}"] += [None] * n_out + plain_values(new_state[c]) + [None] * len(gone)

    def groups(frame: pd.DataFrame) -> dict[tuple[Any, ...], pd.DataFrame]:
        if frame.empty:
            return {}
        return {(k if isinstance(k, tuple) else (k,)): g for k, g in frame.groupby(keys, sort=False, dropna=False)}

    def partition(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        received = list(batches)
        if not received:  # an empty partition
            return
        data = pa.Table.from_batches(received)
        if data.num_rows == 0:
            return
        # Each joined record is a row of the epoch (ROW true) carrying its key's
        # stored state (FOUND true), or, with on_epoch_end, a stored key alone.
        rows = data.filter(pc.fill_null(data.column(ROW), False)).select([f"b_{c}" for c in row_cols])
        rows = rows.rename_columns(row_cols).to_pandas()
        stored = data.filter(data.column(FOUND)).select(keys + [f"s_{v}" for v in values])
        stored = stored.rename_columns(keys + values).to_pandas().drop_duplicates(keys, ignore_index=True)
        table: dict[str, list[Any]] = {c: [] for c in columns}
        if vectorized:
            run_vectorized(rows, stored, table)
            yield pa.RecordBatch.from_pydict(table, schema=arrow_schema)
            return
        by_rows, by_stored = groups(rows), groups(stored)
        empty_rows, empty_stored = rows.iloc[0:0], stored.iloc[0:0]
        for key in {**by_rows, **by_stored}:
            run(key, by_rows.get(key, empty_rows), by_stored.get(key, empty_stored), table)
        yield pa.RecordBatch.from_pydict(table, schema=arrow_schema)

    def renamed(prefix: str, names: Sequence[str]) -> list[str]:
        return [f"{quote(prefix + n)} AS {quote(n)}" for n in names]

    left = rows.selectExpr(*map(quote, keys), *[f"{quote(c)} AS {quote('b_' + c)}" for c in row_cols], f"true AS {ROW}")
    if on_epoch_end is None:  # only the keys of this epoch: O(epoch)
        joined = state.with_stored(left)
    else:  # every stored key is notified: O(state)
        stored_rows = state.df.selectExpr(*map(quote, keys), *map(quote, values), f"true AS {FOUND}")
        joined = left.join(stored_rows, keys, "full").withColumn(FOUND, F.coalesce(F.col(FOUND), F.lit(False)))
    joined = joined.selectExpr(
        *map(quote, keys), *[quote(f"b_{c}") for c in row_cols], ROW, *[f"{quote(v)} AS {quote('s_' + v)}" for v in values], FOUND
    )
    result = materialise(joined.mapInArrow(partition, combined))
    state.retire(epoch, result)  # read by this epoch's consumers; freed once it commits
    new_rows = result.filter(f"{KIND} = 'state'").selectExpr(*renamed("k_", keys), *renamed("s_", values))
    deleted = result.filter(f"{KIND} = 'deleted'").selectExpr(*renamed("k_", keys))
    gone = None
    if ttl is not None:  # keys this epoch changed or deleted are not old
        touched = left.select(*keys).unionByName(new_rows.select(*keys)).unionByName(deleted.select(*keys))
        expired = state.expiring(epoch, ttl, touched)
        if expired is not None:
            gone = materialise(expired)
            state.retire(epoch, gone)  # read by this epoch's consumers; freed once it commits
            deleted = deleted.unionByName(gone.select(*keys))
    state.apply(new_rows, deleted, epoch)
    return result.filter(f"{KIND} = 'out'").selectExpr(*renamed("o_", out_names)), gone


class StatefulOperator(KeyedOperator):
    spec_type = StatefulSpec
    trial_safe = True

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, StatefulSpec)
        self.spec = spec
        require(inputs[0], spec.key)
        state = self.spark.createDataFrame([], spec.state_schema).schema
        clash = [f.name for f in state.fields if f.name in spec.key]
        if clash:
            raise GraphError(f"state_schema repeats key columns {clash}; the key is stored already")
        self.make_state(spec.key, StructType([inputs[0][k] for k in spec.key] + state.fields))
        self.output_schema = self.spark.createDataFrame([], spec.output_schema).schema
        check_ttl_scope(self.processor)
        if spec.ttl is None:
            return {"out": self.output_schema}
        return {"out": self.output_schema, EXPIRED_PORT: self.state.schema}

    def state_signature(self) -> StateSignature:
        """Keys and state columns; not the function, whose code may change (a fix)
        while its state keeps its meaning."""
        return StateSignature.of(
            self.processor.kind, keys=self.spec.key, columns=state_columns(self.state.schema), settings=ttl_setting(self.spec.ttl)
        )

    def step(self, step: Step) -> dict[str, DataFrame]:
        if self.processor.region is None:
            rows = stateful_prepare(self.state, step.inputs[0], step.version)
        else:  # iterations (chunks) run one after another: no merge to overlap, nothing to keep
            rows = self.state.partitioned(step.inputs[0])
        step.wait_previous()
        out, gone = stateful_merge(
            self.state,
            rows,
            self.spec.fn,
            self.output_schema,
            step.version,
            self.spec.on_epoch_end,
            self.spec.vectorized,
            time=step.time,
            ttl=self.spec.ttl,
        )
        if self.spec.ttl is None:
            return {"out": out}
        return {"out": out, EXPIRED_PORT: gone if gone is not None else empty(self.spark, self.state.schema)}
