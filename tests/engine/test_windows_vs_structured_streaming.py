"""The external check of the window operator: PySpark's own example queries
``structured_network_wordcount_windowed.py`` (word counts per sliding window) and
``structured_sessionization.py`` (events per session of a word), run in Spark
Structured Streaming over the same files as ``examples/windowed_counts.py`` - one file
per micro-batch, the event time taken from the rows (the examples' socket timestamps
are processing time, which no two systems share), a watermark, append mode - give
exactly the windows Falkirk gives, also when Falkirk is killed with SIGKILL on the
way and restarted.

Spark keeps windows that its last watermark has not passed; two files of a far-future
sentinel word make it pass every window (their own windows are left out)."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from falkirk.demo.windowed import (
    CSV_OPTIONS,
    OUTPUT_COLUMNS,
    RAW_SCHEMA,
    build_pipeline,
    policy_named,
    shape_of,
    words,
)
from falkirk.graph import Pipeline, Session, Sliding, WindowShape
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.testing.windowed import write_input
from tests.engine.examples import finish
from tests.engine.examples import start as run_example

pytestmark = pytest.mark.slow
SENTINEL = "zz-sentinel"
DELAY = 8


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sss-input") / "in"
    write_input(root, epochs=6, rows=40, seed=17, spread=20, step=10)
    for path in root.glob("*.csv"):  # Spark's watermark starts at 0: keep event times positive
        lines = path.read_text().splitlines()
        shifted = [lines[0]] + [f"{int(t) + 1000},{w}" if t.lstrip("-").isdigit() and w else f"{t},{w}" for t, _, w in (line.partition(",") for line in lines[1:])]
        path.write_text("\n".join(shifted) + "\n")
    return root


def structured_streaming(spark: SparkSession, files: Path, work: Path, query: str) -> pd.DataFrame:
    """The pyspark example ``query`` in Structured Streaming over ``files`` plus two
    sentinel files, one file per micro-batch (in name order: the file source goes
    by modification time)."""
    feed = work / "feed"
    feed.mkdir(parents=True)
    names = sorted(p.name for p in files.glob("*.csv"))
    for i, name in enumerate(names):
        shutil.copy(files / name, feed / name)
        os.utime(feed / name, (1_000_000 + i, 1_000_000 + i))
    for i in range(2):
        sentinel = feed / f"zz{i}.csv"
        sentinel.write_text(f"ts,word\n{10**8 + i},{SENTINEL}\n")
        os.utime(sentinel, (1_000_000 + len(names) + i, 1_000_000 + len(names) + i))
    lines = spark.readStream.schema(RAW_SCHEMA).options(**CSV_OPTIONS).option("maxFilesPerTrigger", 1).csv(str(feed))
    ts = F.trim(F.col("ts"))
    valid = lines.filter(F.col("_raw").isNull() & ts.rlike(r"^[+-]?[0-9]{1,18}$") & F.col("word").isNotNull() & (F.col("word") != ""))
    events = valid.select(F.timestamp_seconds(ts.cast("long")).alias("timestamp"), "word").withWatermark("timestamp", f"{DELAY} seconds")
    counted: DataFrame
    if query == "windowed":  # structured_network_wordcount_windowed.py: window(timestamp, 20 s, 5 s), word -> count
        counted = events.groupBy(F.window("timestamp", "20 seconds", "5 seconds"), "word").count()
        columns = ["window.start", "window.end", "word", "count"]
    else:  # structured_sessionization.py: session_window(eventTime, gap), sessionId -> numEvents
        counted = events.groupBy(F.session_window("timestamp", "4 seconds").alias("window"), F.col("word").alias("sessionId")).agg(
            F.count("*").alias("numEvents")
        )
        columns = ["window.start", "window.end", "sessionId", "numEvents"]
    name = f"sss_{query}_{work.name}".replace("-", "_")
    stream = (
        counted.select(*columns)
        .writeStream.outputMode("append")
        .format("memory")
        .queryName(name)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(600)
    out = spark.sql(f"SELECT * FROM {name}").toPandas()
    out.columns = OUTPUT_COLUMNS
    out["window_start"] = out["window_start"].astype("int64") // 10**9 if out["window_start"].dtype.kind == "M" else out["window_start"]
    out["window_end"] = out["window_end"].astype("int64") // 10**9 if out["window_end"].dtype.kind == "M" else out["window_end"]
    return out[out["word"] != SENTINEL]


def falkirk(spark: SparkSession, files: Path, work: Path, window_args: list[str], crash: str | None) -> pd.DataFrame:
    """``examples/windowed_counts.py`` killed at ``crash`` (if any), then what its
    restart runs to the end, in this process (no second JVM start)."""
    args = ["--input", str(files), "--output", str(work / "out"), "--storage", str(work / "state"), "--watermark-delay", str(DELAY), *window_args]
    if crash is not None:
        assert finish(run_example("windowed_counts.py", args, crash)) == -signal.SIGKILL, f"{crash} was not reached"
    given = dict(zip(window_args[::2], (int(x) for x in window_args[1::2]), strict=True))
    shape = shape_of(given.get("--window"), given.get("--slide"), given.get("--session-gap"))
    pipeline = build_pipeline(str(files), str(work / "out"), shape, DELAY, policy_named("cec"))
    Engine(pipeline, work / "state", spark=spark).run(finish=True)
    return pd.read_parquet(work / "out")


def rows(df: pd.DataFrame) -> list[tuple[int, int, str, int]]:
    return sorted((int(a), int(b), str(w), int(c)) for a, b, w, c in df[OUTPUT_COLUMNS].itertuples(index=False, name=None))


@pytest.mark.parametrize(
    ("query", "window_args", "crash"),
    [
        # (uninterrupted: test_windowed_recovery's chains kill sliding and session
        # windows and compare them with plain Python; a driver start each is CI's clock)
        ("windowed", ["--window", "20", "--slide", "5"], None),
        ("sessions", ["--session-gap", "4"], None),
    ],
)
def test_same_windows_as_structured_streaming(spark: SparkSession, files: Path, tmp_path: Path, query: str, window_args: list[str], crash: str | None, spark_windows: SparkWindows) -> None:
    spark_rows = spark_windows(query)
    falkirk_rows = rows(falkirk(spark, files, tmp_path / "falkirk", window_args, crash))
    assert len(spark_rows) > 15  # a test that can fail
    assert falkirk_rows == spark_rows


SparkWindows = Callable[[str], list[tuple[int, int, str, int]]]


@pytest.fixture(scope="module")
def spark_windows(spark: SparkSession, files: Path, tmp_path_factory: pytest.TempPathFactory) -> SparkWindows:
    """Structured Streaming's windows of each query, computed once for the module."""
    done: dict[str, list[tuple[int, int, str, int]]] = {}

    def of(query: str) -> list[tuple[int, int, str, int]]:
        if query not in done:
            done[query] = rows(structured_streaming(spark, files, tmp_path_factory.mktemp(f"spark-{query}"), query))
        return done[query]

    return of


def timestamp_pipeline(files: Path, out: Path, shape: WindowShape) -> Pipeline:
    """``examples/windowed_counts.py``'s query with the event time as a ``timestamp``
    and the sizes and delay as durations."""
    p = Pipeline("windowed_timestamps")
    lines = p.source("lines", FileSource(str(files), "csv", RAW_SCHEMA, 1, CSV_OPTIONS))
    timed = lines.map("words", lambda df: words(df).withColumn("ts", F.timestamp_seconds("ts")))
    counts = timed.window("counts", "word", "ts", shape, {"count": ("count", None)}, watermark_delay=f"{DELAY} seconds", policy=policy_named("lazy"))
    counts.map("rows", lambda df: df.select(*OUTPUT_COLUMNS)).sink("output", ParquetTableSink(str(out), epoch_column=None))
    return p


@pytest.mark.parametrize(
    ("query", "shape"),
    [("windowed", Sliding("20 seconds", "5 seconds")), ("sessions", Session(timedelta(seconds=4)))],
)
def test_same_windows_as_structured_streaming_over_timestamps(spark: SparkSession, files: Path, tmp_path: Path, query: str, shape: WindowShape, spark_windows: SparkWindows) -> None:
    """Structured Streaming's ``window()``/``session_window()`` over a timestamp
    column, and Falkirk's window over the same timestamp column: the same windows."""
    Engine(timestamp_pipeline(files, tmp_path / "out", shape), tmp_path / "state", spark=spark).run(finish=True)
    out = pd.read_parquet(tmp_path / "out")
    assert out["window_start"].dtype.kind == "M" and out["window_end"].dtype.kind == "M", "the bounds are timestamps"
    for column in ("window_start", "window_end"):
        out[column] = (out[column] - pd.Timestamp(0, tz=out[column].dt.tz)) // pd.Timedelta(seconds=1)
    assert len(spark_windows(query)) > 15
    assert rows(out) == spark_windows(query)
