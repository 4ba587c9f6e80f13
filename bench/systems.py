"""The benchmark workloads, written for each system the way its users would.

* **W1 clickstream**: the engine issue's query (validate -> sessionize per sess_id ->
  per-user count/max/avg of session durations), input CSV files.
* **W2 keyed aggregate**: per-key count/sum/max over ``key, value`` rows, JVM-native
  aggregations in every system, input CSV files without a header.

Every function runs one configuration to completion over all files of ``input``
and returns ``{"seconds": processing time, "epoch_seconds": [...]}`` (session start
excluded, reported separately by the runner). Outputs go under ``work``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from falkirk.demo.clickstream import (
    CSV_OPTIONS,
    RAW_SCHEMA,
    build_pipeline,
    check_rows,
    parse,
    rejected_rows,
)
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline, Policy, Stateless
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine

W2_SCHEMA = "key long, value long"
W2_AGGREGATES = {"count": ("count", None), "sum": ("sum", "value"), "max": ("max", "value")}

#: Falkirk configurations: the policy of every stateful processor.
POLICIES: dict[str, Callable[[], Policy]] = {
    "none": Stateless,
    "lazy": LazyCheckpoint,  # the default interval
    "eager": EagerCheckpoint,
}

#: Structured Streaming state store: RocksDB with changelog checkpointing.
SS_CONF = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


# -- Falkirk -----------------------------------------------------------------------------


Result = dict[str, Any]
#: The file a Falkirk standby driver creates in its work directory once it is warmed
#: up and waiting for the storage root's lock.
STANDBY_READY = "standby.ready"


def falkirk_w1(
    spark: SparkSession, input: str, work: Path, policy: str, service: bool = False, standby_ready: Path | None = None
) -> Result:
    # The vectorized sessionizer unless the policy says "-perkey" (the per-session form).
    name, _, form = policy.partition("-")
    pipeline = build_pipeline(
        input,
        str(work / "out"),
        str(work / "rejected"),
        sessions_policy=POLICIES[name](),
        stats_policy=POLICIES[name](),
        vectorized=form != "perkey",
    )
    return _run_engine(Engine(pipeline, work / "state", spark=spark), service, standby_ready)


def falkirk_w2_pipeline(input: str, work: Path, policy: str) -> Pipeline:
    p = Pipeline("w2")
    (
        p.source("events", FileSource(input, "csv", W2_SCHEMA))
        .aggregate("per_key", "key", W2_AGGREGATES, policy=POLICIES[policy]())
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def falkirk_w2(
    spark: SparkSession, input: str, work: Path, policy: str, service: bool = False, standby_ready: Path | None = None
) -> Result:
    pipeline = falkirk_w2_pipeline(input, work, policy)
    return _run_engine(Engine(pipeline, work / "state", spark=spark), service, standby_ready)


def _run_engine(engine: Engine, service: bool, standby_ready: Path | None = None) -> Result:
    """Run to the end of the input, or as a service waiting for more (until killed);
    with ``standby_ready``, as a warm standby that creates that file once it waits.
    Each committed epoch's input files are appended to ``<work>/epochs.jsonl`` (the
    latency bench maps files to epochs with it: committed offsets are forgotten once
    no recovery needs them)."""
    start = time.perf_counter()
    epochs_log = Path(engine.root).parent / "epochs.jsonl"

    def record(epoch: int, _seconds: float, _report: Any) -> None:
        names = [f[0] for o in (engine.ledger.offsets[s].get(epoch) for s in engine.ledger.sources) if o for f in o["files"]]
        with open(epochs_log, "a") as f:
            f.write(json.dumps({"epoch": epoch, "files": names}) + "\n")

    engine.on_epoch = record
    report = engine.run(
        idle_timeout=math.inf if service else 0.0,
        poll_interval=0.05,
        standby=standby_ready is not None,
        on_standby=standby_ready.touch if standby_ready is not None else None,
    )
    return {
        "seconds": time.perf_counter() - start,
        "epoch_seconds": report.epoch_seconds,
        "step_seconds": report.step_seconds,
        "step_finished": report.step_finished,
    }


def _ss_result(start: float, query: Any) -> Result:
    seconds = time.perf_counter() - start
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    return {"seconds": seconds, "epoch_seconds": [p["durationMs"]["triggerExecution"] / 1000 for p in progress]}


# -- Spark Structured Streaming ----------------------------------------------------------


def _foreach_parquet(out: Path) -> Callable[[DataFrame, int], None]:
    """Idempotent per-batch output (a replayed batch overwrites its directory): the
    documented way to get exactly-once output from ``foreachBatch``."""

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.withColumn("epoch", F.lit(batch_id).cast("long")).write.mode("overwrite").parquet(
            str(out / f"batch={batch_id}")
        )

    return write


def _trigger(writer: Any, service: bool) -> Any:
    """All available input then stop; or, as a service, a new micro-batch as soon as
    the previous one is done (Structured Streaming's default trigger)."""
    return writer.trigger(processingTime="0 seconds") if service else writer.trigger(availableNow=True)


def ss_w2(spark: SparkSession, input: str, work: Path, policy: str = "rocksdb", service: bool = False) -> Result:
    for key, value in SS_CONF.items():
        spark.conf.set(key, value)
    events = spark.readStream.schema(W2_SCHEMA).option("maxFilesPerTrigger", 1).csv(input)
    per_key = events.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"), F.max("value").alias("max")
    )
    start = time.perf_counter()
    writer = (
        per_key.writeStream.outputMode("update")
        .foreachBatch(_foreach_parquet(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
    )
    query = _trigger(writer, service).start()
    query.awaitTermination()
    return _ss_result(start, query)


def _sessionize_with_state(key: Any, frames: Any, state: Any) -> Any:
    """The W1 sessionizer for ``applyInPandasWithState`` (same logic as Falkirk's)."""
    user = start_ts = end_ts = None
    if state.exists:
        user, start_ts, end_ts = state.get
    for rows in frames:
        starts = rows.loc[rows["event"] == "start"]
        if len(starts):
            first = starts.sort_values("ts").iloc[0]
            if start_ts is None or first["ts"] < start_ts:
                start_ts, user = int(first["ts"]), first["user_id"]
        if user is None:
            user = rows["user_id"].iloc[0]
        ends = rows.loc[rows["event"] == "end", "ts"]
        if len(ends):
            end_ts = int(ends.max()) if end_ts is None else max(int(end_ts), int(ends.max()))
    if start_ts is not None and end_ts is not None:
        state.remove()
        yield pd.DataFrame({"user_id": [user], "duration": [float(end_ts - start_ts)]})
    else:
        state.update((user, start_ts, end_ts))


def ss_w1(spark: SparkSession, input: str, work: Path, policy: str = "rocksdb", service: bool = False) -> Result:
    for key, value in SS_CONF.items():
        spark.conf.set(key, value)
    raw = spark.readStream.schema(RAW_SCHEMA).options(**CSV_OPTIONS).option("maxFilesPerTrigger", 1).csv(input)
    checked = check_rows(raw)
    sessions = (
        parse(checked.filter(F.col("reason").isNull()))
        .groupBy("sess_id")
        .applyInPandasWithState(
            _sessionize_with_state,
            "user_id string, duration double",
            "user_id string, start_ts long, end_ts long",
            "append",
            GroupStateTimeout.NoTimeout,
        )
    )
    stats = sessions.groupBy("user_id").agg(
        F.count(F.lit(1)).alias("sessions"), F.max("duration").alias("max_duration"), F.avg("duration").alias("avg_duration")
    )
    start = time.perf_counter()
    rejected = _trigger(
        rejected_rows(checked.filter(F.col("reason").isNotNull()))
        .writeStream.format("parquet")
        .option("path", str(work / "rejected"))
        .option("checkpointLocation", str(work / "checkpoint-rejected")),
        service,
    ).start()
    main = _trigger(
        stats.writeStream.outputMode("update")
        .foreachBatch(_foreach_parquet(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint")),
        service,
    ).start()
    main.awaitTermination()
    rejected.awaitTermination()
    return _ss_result(start, main)


# -- one Spark batch job ------------------------------------------------------------------


def batch_w2(spark: SparkSession, input: str, work: Path, policy: str = "batch") -> Result:
    start = time.perf_counter()
    events = spark.read.schema(W2_SCHEMA).csv(input)
    per_key = events.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"), F.max("value").alias("max")
    )
    per_key.write.parquet(str(work / "out"))
    return {"seconds": time.perf_counter() - start, "epoch_seconds": []}


def batch_w1(spark: SparkSession, input: str, work: Path, policy: str = "batch") -> Result:
    """W1 as a batch job: sessions are whole, so a join of starts and ends replaces
    the stateful sessionizer."""
    start = time.perf_counter()
    checked = check_rows(spark.read.schema(RAW_SCHEMA).options(**CSV_OPTIONS).csv(input)).cache()
    rejected_rows(checked.filter(F.col("reason").isNotNull())).write.parquet(str(work / "rejected"))
    valid = parse(checked.filter(F.col("reason").isNull()))
    starts = valid.filter(F.col("event") == "start").groupBy("sess_id").agg(
        F.min_by("user_id", "ts").alias("user_id"), F.min("ts").alias("start_ts")
    )
    ends = valid.filter(F.col("event") == "end").groupBy("sess_id").agg(F.max("ts").alias("end_ts"))
    durations = starts.join(ends, "sess_id").select("user_id", (F.col("end_ts") - F.col("start_ts")).cast("double").alias("d"))
    durations.groupBy("user_id").agg(
        F.count(F.lit(1)).alias("sessions"), F.max("d").alias("max_duration"), F.avg("d").alias("avg_duration")
    ).write.parquet(str(work / "out"))
    checked.unpersist()
    return {"seconds": time.perf_counter() - start, "epoch_seconds": []}


RUNNERS: dict[tuple[str, str], Callable[..., Result]] = {
    ("falkirk", "w1"): falkirk_w1,
    ("falkirk", "w2"): falkirk_w2,
    ("ss", "w1"): ss_w1,
    ("ss", "w2"): ss_w2,
    ("batch", "w1"): batch_w1,
    ("batch", "w2"): batch_w2,
}
