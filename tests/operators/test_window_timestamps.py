"""Windows over a ``timestamp`` or ``timestamp_ntz`` event time, with sizes and the
watermark delay as durations: the same windows, late rows and watermarks as over the
same times as integer seconds, with the bounds given back as timestamps of the
column's type."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from falkirk.graph import (
    GraphError,
    Input,
    Processor,
    Session,
    Sliding,
    Stateless,
    Tumbling,
    WindowShape,
)
from falkirk.graph.durations import Duration
from falkirk.graph.windows import WindowSpec
from falkirk.operators import Step, operator_for
from tests.operators.test_window import epochs_of

SHAPES: dict[str, tuple[WindowShape, WindowShape]] = {
    "tumbling": (Tumbling(10), Tumbling("10 seconds")),
    "sliding": (Sliding(12, 4), Sliding("12 seconds", timedelta(seconds=4))),
    "session": (Session(5), Session("5 s")),
}


def run(spark: SparkSession, shape: WindowShape, delay: int | str, time_type: str, epochs: list[list[tuple[Any, ...]]]) -> list[list[Any]]:
    """Every epoch's output and late rows, with times as integer seconds."""
    spec = WindowSpec(key=("word",), time="ts", shape=shape, aggregates={"n": ("count", None), "total": ("sum", "v")}, watermark_delay=delay)
    op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
    schema = spark.createDataFrame([], f"word string, ts {time_type}, v long").schema
    op.set_up([schema])
    outputs = []
    for e, rows in enumerate([*epochs, []], 1):
        frame = spark.createDataFrame(rows, "word string, ts long, v long").withColumn("ts", as_time("ts", time_type))
        out = op.step(Step(e, [frame], final=e == len(epochs) + 1))
        if time_type != "long":
            assert out["out"].schema["window_start"].dataType.simpleString() == time_type
            assert out["late"].schema["ts"].dataType.simpleString() == time_type
        windows = seconds(out["out"], "window_start", "window_end")
        late = seconds(out["late"], "ts", "window_start", "window_end")
        outputs.append(sorted((r["window_start"], r["window_end"], r["word"], r["n"], r["total"]) for r in windows.collect()))
        outputs.append(sorted((r["word"], r["ts"], r["window_start"], r["reason"][:5]) for r in late.collect() if r["word"] and r["ts"] is not None))
        op.release(e)
    return outputs


def as_time(column: str, time_type: str) -> Any:
    if time_type == "long":
        return F.col(column)
    ts = F.timestamp_seconds(F.col(column))  # (the session's time zone is UTC)
    return ts if time_type == "timestamp" else ts.cast("timestamp_ntz")


def seconds(df: DataFrame, *columns: str) -> DataFrame:
    """``columns`` (times) as integer seconds since 1970 (UTC)."""
    for c in columns:
        if df.schema[c].dataType.simpleString() != "bigint":
            df = df.withColumn(c, F.unix_seconds(F.col(c).cast("timestamp")))
    return df


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_timestamps_give_the_windows_integer_seconds_give(spark: SparkSession, shape: str) -> None:
    epochs = epochs_of(3, n=4)
    integers, durations = SHAPES[shape]
    want = run(spark, integers, 3, "long", epochs)
    assert any(late for late in want[1::2]), "the epochs have late rows"
    for time_type in ("timestamp", "timestamp_ntz"):
        assert run(spark, durations, "3 seconds", time_type, epochs) == want, time_type


def test_late_reasons_show_timestamps(spark: SparkSession) -> None:
    spec = WindowSpec(key=("word",), time="ts", shape=Tumbling("1 minute"), aggregates={"n": ("count", None)}, watermark_delay="10 seconds")
    op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
    op.set_up([spark.createDataFrame([], "word string, ts timestamp").schema])
    rows = spark.createDataFrame([("a", 600)], "word string, s long").select("word", F.timestamp_seconds("s").alias("ts"))
    op.step(Step(1, [rows]))
    op.release(1)
    op.step(Step(2, [rows.limit(0)]))
    op.release(2)
    out = op.step(Step(3, [spark.createDataFrame([("a", 30)], "word string, s long").select("word", F.timestamp_seconds("s").alias("ts"))]))
    (late,) = out["late"].collect()
    assert late["reason"] == "late: window [1970-01-01 00:00:00, 1970-01-01 00:01:00) had closed (watermark 1970-01-01 00:09:50)"
    op.release(3)
    op.step(Step(4, [rows.limit(0)], final=True))  # the input ends: every window closes
    op.release(4)
    out = op.step(Step(5, [rows]))
    (late,) = out["late"].collect()
    assert late["reason"] == (  # not the final watermark as a time (the year 294247)
        "late: window [1970-01-01 00:10:00, 1970-01-01 00:11:00) had closed "
        "(the input was finished (run(finish=True)), which closed every window)"
    )


def test_sizes_of_the_other_kind_are_refused(spark: SparkSession) -> None:
    def set_up(shape: WindowShape, time_type: str, delay: Any = 0) -> None:
        spec = WindowSpec(key=("word",), time="ts", shape=shape, aggregates={"n": ("count", None)}, watermark_delay=delay)
        operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark).set_up(
            [spark.createDataFrame([], f"word string, ts {time_type}").schema]
        )

    with pytest.raises(GraphError, match=r"'ts' is a timestamp, so give Tumbling\(size=10\)'s sizes as durations"):
        set_up(Tumbling(10), "timestamp")
    with pytest.raises(GraphError, match=r"'ts' is an integer .* durations such as '10 minutes' need a timestamp column"):
        set_up(Tumbling("10 minutes"), "bigint")
    with pytest.raises(GraphError, match="'ts' is string; it must be a timestamp, a timestamp_ntz or an integer"):
        set_up(Tumbling("10 minutes"), "string")
    with pytest.raises(GraphError, match=r"give both as integers .* or both as durations"):
        WindowSpec(key=("word",), time="ts", shape=Tumbling("10 minutes"), aggregates={"n": ("count", None)}, watermark_delay=5)
    with pytest.raises(GraphError, match=r"every size as an integer .* or every one as a duration"):
        Sliding("10 minutes", 60)
    with pytest.raises(GraphError, match="is not a duration; write it as Spark writes intervals"):
        Tumbling("ten minutes")
    assert Tumbling(timedelta(minutes=10)).size == Duration(600_000_000, "0:10:00")


def test_the_first_and_last_event_time_of_a_window_are_timestamps(spark: SparkSession) -> None:
    spec = WindowSpec(
        key=("word",), time="ts", shape=Tumbling("1 minute"), watermark_delay="0 seconds",
        aggregates={"n": ("count", None), "first": ("min", "ts"), "last": ("max", "ts")},
    )  # fmt: skip
    op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
    op.set_up([spark.createDataFrame([], "word string, ts timestamp").schema])
    rows = spark.createDataFrame([("a", 5), ("a", 50), ("a", 70)], "word string, s long").select("word", F.timestamp_seconds("s").alias("ts"))
    out = op.step(Step(1, [rows], final=True))["out"]
    assert out.schema["last"].dataType.simpleString() == "timestamp"
    got = sorted(seconds(out, "window_start", "first", "last").select("window_start", "n", "first", "last").collect())
    assert [tuple(r) for r in got] == [(0, 2, 5, 50), (60, 1, 70, 70)]
    with pytest.raises(GraphError, match=r"a sum or an average of the timestamp column 'ts' means nothing"):
        bad = WindowSpec(key=("word",), time="ts", shape=Tumbling("1 minute"), aggregates={"s": ("sum", "ts")})
        operator_for(Processor("w", bad, (Input("in", "out"),), Stateless()), spark).set_up([spark.createDataFrame([], "word string, ts timestamp").schema])
