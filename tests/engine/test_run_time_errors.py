"""Run-time errors say where they come from: the processor (not the sink or
checkpoint where Spark's lazy plan happened to fail), the epoch, the input files
and the user's line - in one line, without the query context's noise."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from falkirk.execution.diagnosis import StepError
from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.ops.status import last_failure
from falkirk.runtime import Engine


def parse(df: DataFrame) -> DataFrame:
    return df.select("user", F.col("ts").cast("long").alias("ts"))  # the line the error names


PARSE_LINE = inspect.getsourcelines(parse)[1] + 1


def readme_pipeline(work: Path) -> Pipeline:
    """The first example of docs/how-to/pipelines.md."""
    p = Pipeline("clicks", on_error="stop")  # the error stops the run (the default sets the row aside)
    raw = p.source(
        "events",
        FileSource(str(work / "in"), "csv", "user string, ts string, _raw string", options={"header": "true", "columnNameOfCorruptRecord": "_raw"}),
    )
    valid, rejected = raw.validate("validate", lambda df: df.withColumn("reason", F.when(F.col("_raw").isNotNull(), "malformed row")))
    rejected.sink("dead_letter", ParquetTableSink(str(work / "rejected"), epoch_column=None))
    (
        valid.map("parse", parse)
        .exchange("by_user", "user")
        .aggregate("stats", "user", {"n": ("count", None), "last": ("max", "ts")}, policy=LazyCheckpoint(every=5))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def test_a_bad_cast_names_the_map_its_epoch_its_file_and_the_users_line(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a-1.csv").write_text("user,ts\nalice,1\nbob,2\n")
    (tmp_path / "in" / "a-2.csv").write_text("user,ts\nalice,3\ncarol,xx\n")
    with pytest.raises(StepError) as caught:
        Engine(readme_pipeline(tmp_path), str(tmp_path / "state"), spark=spark).run()
    failure = caught.value.failure
    assert (failure.processor, failure.kind, failure.epoch) == ("parse", "map", 2)
    assert failure.inputs == ("events: a-2.csv",)
    assert failure.cause.startswith("[CAST_INVALID_INPUT] The value 'xx'") and "== DataFrame ==" not in failure.cause
    assert failure.line == f"{__file__}:{PARSE_LINE}"
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("processor 'parse' failed on epoch 2's data: [CAST_INVALID_INPUT]")
    assert f"(a map; input: events: a-2.csv; at {__file__}:{PARSE_LINE})" in message
    # Epoch 1 committed; the bad epoch's output is nowhere to be seen.
    assert pd.read_parquet(tmp_path / "out")["epoch"].tolist() == [1, 1]
    # The details stay with the root: the failure, then the whole trace, the JVM's included.
    assert message.endswith(f"(details: falkirk inspect {tmp_path / 'state'} failure)")
    details = last_failure(str(tmp_path / "state"))
    assert "processor: parse" in details and "epoch: 2" in details and "inputs: ['events: a-2.csv']" in details
    assert "org.apache.spark" in details and "CAST_INVALID_INPUT" in details


def explode_on(key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    if (rows["v"] < 0).any():
        raise ValueError(f"negative value for key {key[0]!r}")  # the line the error names
    return rows, state


RAISE_LINE = inspect.getsourcelines(explode_on)[1] + 2


def test_an_exception_in_a_stateful_function_names_it_and_the_users_line(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a-1.csv").write_text("k,v\nx,1\ny,-2\n")
    p = Pipeline("raising", on_error="stop")
    (
        p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"}))
        .stateful("check", "k", explode_on, state_schema="v long", output_schema="k string, v long")
        .sink("out", ParquetTableSink(str(tmp_path / "out")))
    )
    with pytest.raises(StepError) as caught:
        Engine(p, str(tmp_path / "state"), spark=spark).run()
    failure = caught.value.failure
    assert (failure.processor, failure.kind, failure.epoch, failure.inputs) == ("check", "stateful", 1, ("rows: a-1.csv",))
    assert failure.cause == "ValueError: negative value for key 'y'"
    assert failure.line == f"{__file__}:{RAISE_LINE}"
