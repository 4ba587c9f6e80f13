"""``aggregate``: running aggregates per key (count, sum, min, max, avg, first, last),
as JVM expressions merged into :class:`~falkirk.spark.state.KeyedState`.

Each epoch emits, for the keys it touched, the key and its updated aggregates. The
state keeps each aggregate's partials (a sum and a count for an average).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StructField, StructType

from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import EXPIRED_PORT, AggregateSpec
from falkirk.operators.base import Step, require, state_columns
from falkirk.operators.keyed import KeyedOperator, check_ttl_scope, ttl_setting
from falkirk.spark.frames import empty, quote
from falkirk.spark.materialise import materialise
from falkirk.spark.state import KeyedState

AggSpec = Mapping[str, tuple[str, str | None]]


def partials_of(out: str, func: str, dtype: DataType | None) -> list[tuple[str, DataType, str]]:
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
        fields += [StructField(name, t, True) for name, t, _ in partials_of(out, func, dtype)]
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


def combine_sql(rule: str, old: str, new: str) -> str:
    """SQL combining a stored partial (column ``old``) with the epoch's (``new``)."""
    old, new = quote(old), quote(new)
    if rule == "add":
        return f"CASE WHEN {old} IS NULL THEN {new} WHEN {new} IS NULL THEN {old} ELSE {old} + {new} END"
    if rule == "min":
        return f"least({old}, {new})"
    if rule == "max":
        return f"greatest({old}, {new})"
    if rule == "first":
        return f"coalesce({old}, {new})"
    return f"coalesce({new}, {old})"  # last


def final_sql(out: str, func: str) -> str:
    """SQL of an aggregate's output column from its partials."""
    if func == "count":
        return f"coalesce({quote(out + '__count')}, 0) AS {quote(out)}"
    if func == "avg":
        return f"CAST({quote(out + '__sum')} / {quote(out + '__count')} AS double) AS {quote(out)}"
    if func == "sum":
        return f"{quote(out + '__sum')} AS {quote(out)}"
    return f"{quote(out + '__' + func)} AS {quote(out)}"


def epoch_partials(schema: StructType, aggregates: AggSpec) -> list[Column]:
    """The partial aggregates of one epoch's rows (``schema``: their columns)."""
    columns: list[Column] = []
    for out, (func, col) in aggregates.items():
        dtype = schema[col].dataType if col is not None else None
        columns += [_epoch_partial(func, col, name, t) for name, t, _ in partials_of(out, func, dtype)]
    return columns


def _combine_rules(state_schema: StructType, aggregates: AggSpec) -> list[tuple[str, str]]:
    """(state column, combine rule) of every partial aggregate. The state schema
    has each partial's type, which is all :func:`_partials` needs of the input."""
    stored = {f.name: f.dataType for f in state_schema.fields}
    rules: list[tuple[str, str]] = []
    for out, (func, _) in aggregates.items():
        dtype = stored.get(f"{out}__{func}") or stored.get(f"{out}__sum")
        rules += [(name, rule) for name, _, rule in partials_of(out, func, dtype)]
    return rules


def aggregate_prepare(state: KeyedState, batch: DataFrame, aggregates: AggSpec, epoch: int) -> DataFrame:
    """The first half of an epoch of a keyed aggregate, which needs nothing of the
    state: the epoch's partial aggregates per key, laid out like the state runs
    (hash-partitioned by key - one shuffle - and sorted by key) and materialised. The engine runs it while the previous
    epoch is still merging into the state, so reading and aggregating the input of
    one epoch overlaps the merge of the one before."""
    partials = batch.groupBy(*state.keys).agg(*epoch_partials(batch.schema, aggregates))
    partials = materialise(partials.sortWithinPartitions(*state.keys))
    state.retire(epoch, partials)  # read by this epoch's merge; freed once it commits
    return partials


def aggregate_merge(
    state: KeyedState, partials: DataFrame, aggregates: AggSpec, epoch: int, ttl: int | None = None
) -> dict[str, DataFrame]:
    """The second half: combine :func:`aggregate_prepare`'s partials with the
    stored aggregates of their keys (only those keys are looked up and rewritten:
    O(epoch), not O(state)); return every key of the epoch with its updated
    aggregates (``out``), and with a ``ttl`` the keys it removes, with their last
    aggregates (``expired``)."""
    keys = list(state.keys)
    rules = _combine_rules(state.schema, aggregates)
    new = partials.selectExpr(*map(quote, keys), *[f"{quote(n)} AS {quote('n_' + n)}" for n, _ in rules])
    merged = state.with_stored(new).selectExpr(
        *map(quote, keys), *[f"{combine_sql(rule, n, 'n_' + n)} AS {quote(n)}" for n, rule in rules]
    )
    finals = [*map(quote, keys), *[final_sql(o, f) for o, (f, _) in aggregates.items()]]
    if ttl is None:
        return {"out": state.apply(merged, None, epoch, partitioned=True).selectExpr(*finals)}
    expired = state.expiring(epoch, ttl, partials)
    gone = None if expired is None else materialise(expired)
    if gone is not None:
        state.retire(epoch, gone)  # read by this epoch's consumers; freed once it commits
    changed = state.apply(merged, None if gone is None else gone.select(*keys), epoch, partitioned=True)
    out = {"out": changed.selectExpr(*finals)}
    out[EXPIRED_PORT] = (gone if gone is not None else empty(state.spark, state.schema)).selectExpr(*finals)
    return out


class AggregateOperator(KeyedOperator):
    spec_type = AggregateSpec
    trial_safe = True

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, AggregateSpec)
        self.keys, self.aggregates = spec.key, spec.aggregates
        require(inputs[0], self.keys + tuple(c for _, c in self.aggregates.values() if c))
        state_schema = aggregate_state_schema(inputs[0], self.keys, self.aggregates)
        self.make_state(self.keys, state_schema)
        fields = [inputs[0][k] for k in self.keys]
        for out, (func, _col) in self.aggregates.items():
            t: DataType | None = {"count": LongType(), "avg": DoubleType()}.get(func)
            if t is None:
                t = state_schema[f"{out}__{func}"].dataType
            fields.append(StructField(out, t, True))
        check_ttl_scope(self.processor)
        self.ttl = spec.ttl
        return {port: StructType(fields) for port in spec.output_ports}

    def state_signature(self) -> StateSignature:
        return StateSignature.of(
            self.processor.kind, keys=self.keys, aggregates=self.aggregates, columns=state_columns(self.state.schema),
            settings=ttl_setting(self.ttl),
        )  # fmt: skip

    def step(self, step: Step) -> dict[str, DataFrame]:
        partials = aggregate_prepare(self.state, step.inputs[0], self.aggregates, step.version)
        step.wait_previous()
        return aggregate_merge(self.state, partials, self.aggregates, step.version, self.ttl)
