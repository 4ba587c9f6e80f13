"""Output schemas of every processor, found before anything runs.

Applying each step to empty DataFrames checks the whole pipeline up front (a user
function naming a missing column fails here, with the processor's name) and gives
the schemas that keyed state, logs and sinks need before the first epoch.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DataType, DoubleType, LongType, StructField, StructType

from falkirk.graph import GraphError, Pipeline, Processor
from falkirk.spark.operators import aggregate_state_schema

REASON = "reason"


def call_map(fn: Callable[..., Any], df: DataFrame, epoch: int) -> DataFrame:
    """``fn(df)`` or ``fn(df, epoch)``, whichever it accepts."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
    result = fn(df, epoch) if len(params) >= 2 else fn(df)
    if not isinstance(result, DataFrame):
        raise GraphError(f"a map/validate function must return a DataFrame, got {type(result).__name__}")
    return result


def infer(spark: SparkSession, pipeline: Pipeline) -> tuple[dict[tuple[str, str], StructType], dict[str, StructType]]:
    """(output schema per (processor, port), keyed-state schema per stateful processor)."""
    outputs: dict[tuple[str, str], StructType] = {}
    states: dict[str, StructType] = {}
    for p in pipeline.processors.values():
        try:
            _infer_one(spark, p, outputs, states)
        except GraphError as exc:
            raise GraphError(f"processor {p.name!r}: {exc}") from exc
        except Exception as exc:  # pyspark analysis errors: name the processor
            raise GraphError(f"processor {p.name!r} ({p.kind}) cannot run on its input: {exc}") from exc
    return outputs, states


def _infer_one(
    spark: SparkSession,
    p: Processor,
    outputs: dict[tuple[str, str], StructType],
    states: dict[str, StructType],
) -> None:
    ins = [outputs[(i.src, i.port)] for i in p.inputs]
    if p.kind == "source":
        outputs[(p.name, "out")] = p.params["source"].struct(spark)
        return
    empty = spark.createDataFrame([], ins[0]) if ins else None
    if p.kind == "map":
        outputs[(p.name, "out")] = call_map(p.params["fn"], empty, 0).schema  # type: ignore[arg-type]
    elif p.kind == "validate":
        schema = call_map(p.params["fn"], empty, 0).schema  # type: ignore[arg-type]
        if REASON not in schema.fieldNames():
            raise GraphError(f"the validate function must add a string column {REASON!r} (null for valid rows)")
        outputs[(p.name, "valid")] = StructType([f for f in schema.fields if f.name != REASON])
        outputs[(p.name, "rejected")] = schema
    elif p.kind == "exchange":
        _require(ins[0], p.params["key"])
        outputs[(p.name, "out")] = ins[0]
    elif p.kind == "aggregate":
        keys, aggs = p.params["key"], p.params["aggregates"]
        _require(ins[0], keys + tuple(c for _, c in aggs.values() if c))
        states[p.name] = aggregate_state_schema(ins[0], keys, aggs)
        fields = [ins[0][k] for k in keys]
        for out, (func, _col) in aggs.items():
            t: DataType | None = {"count": LongType(), "avg": DoubleType()}.get(func)
            if t is None:
                t = states[p.name][f"{out}__{func}"].dataType
            fields.append(StructField(out, t, True))
        outputs[(p.name, "out")] = StructType(fields)
    elif p.kind == "stateful":
        keys = p.params["key"]
        _require(ins[0], keys)
        state = spark.createDataFrame([], p.params["state_schema"]).schema
        clash = [f.name for f in state.fields if f.name in keys]
        if clash:
            raise GraphError(f"state_schema repeats key columns {clash}; the key is stored already")
        states[p.name] = StructType([ins[0][k] for k in keys] + state.fields)
        outputs[(p.name, "out")] = spark.createDataFrame([], p.params["output_schema"]).schema


def _require(schema: StructType, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in schema.fieldNames()]
    if missing:
        raise GraphError(f"columns {missing} are not in its input (columns: {schema.fieldNames()})")
