"""Payments with bad values in them (``examples/payments.py``): the engine's own
isolation of poison rows, with no validation step in front of it.

CSV files with header ``user,amount,ts`` are read in name order, one file per epoch.
``parse`` casts ``amount`` to BIGINT and ``ts`` (``2026-11-26 10:15:00``, UTC) to
TIMESTAMP under Spark's ANSI mode, so a bad value raises there; with
``on_error="dead_letter"`` (the default) the engine sets such rows aside and the
epoch commits without them. The dataflow and its policies::

    payments (FileSource) ── parse (map) ─┬─ by_user ── totals (aggregate; lazy, every 3) ── totals (Parquet)
                                          ├─ windows (10-min tumbling on ts; eager) ────────── windows (Parquet)
                                          └─ errors ────────────────────────────────────────── errors (Parquet)

* ``totals``: per user, the running count and sum of the amounts of every good row
  so far; one row per user changed in an epoch (``user, epoch, n, total``);
* ``windows``: per user and 10-minute event-time window (watermark 5 minutes behind
  the latest ``ts``), the count and sum, written once when the window closes; the
  last epoch of the input closes every window still open;
* ``errors``: every row ``parse`` could not cast, as read (strings), with
  ``processor`` and ``reason`` - exactly once.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.graph import EagerCheckpoint, LazyCheckpoint, OnError, Pipeline, Tumbling
from falkirk.io import FileSource, ParquetTableSink

RAW_SCHEMA = "user string, amount string, ts string"
CSV_OPTIONS = {"header": "true"}
TOTALS_COLUMNS = ["user", "epoch", "n", "total"]
WINDOWS_COLUMNS = ["user", "window_start", "window_end", "n", "total"]
ERRORS_COLUMNS = ["user", "amount", "ts", "processor", "reason"]
WINDOW = "10 minutes"
WATERMARK_DELAY = "5 minutes"


def parse(df: DataFrame) -> DataFrame:
    """The typed payment: ``amount`` as BIGINT, ``ts`` as TIMESTAMP (ANSI casts: a
    malformed value raises)."""
    return df.select("user", F.col("amount").cast("bigint").alias("amount"), F.col("ts").cast("timestamp").alias("ts"))


def build_pipeline(
    input_dir: str, output_dir: str, *, on_error: OnError | str = OnError.DEAD_LETTER, parse: Callable[[DataFrame], DataFrame] = parse
) -> Pipeline:
    """The payments pipeline (see the module docstring); tables under ``output_dir``.
    ``parse``: another way to type the rows (the tests' Python UDF)."""
    p = Pipeline("payments", on_error=on_error)
    raw = p.source("payments", FileSource(input_dir, "csv", RAW_SCHEMA, options=CSV_OPTIONS))
    parsed = raw.map("parse", parse)
    parsed.errors().sink("errors", ParquetTableSink(f"{output_dir}/errors", epoch_column=None))
    (
        parsed.exchange("by_user", "user")
        .aggregate("totals", "user", {"n": ("count", None), "total": ("sum", "amount")}, policy=LazyCheckpoint(every=3))
        .sink("totals_out", ParquetTableSink(f"{output_dir}/totals"))
    )
    (
        parsed.window(
            "windows", "user", "ts", Tumbling(WINDOW), {"n": ("count", None), "total": ("sum", "amount")},
            watermark_delay=WATERMARK_DELAY, mode="append", policy=EagerCheckpoint(),
        )
        .sink("windows_out", ParquetTableSink(f"{output_dir}/windows", epoch_column=None))
    )  # fmt: skip
    return p
