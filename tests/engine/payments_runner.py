"""Runs a variant of the payments pipeline whose bad values fail elsewhere than in
an ANSI cast (a subprocess for crash tests).

    python payments_runner.py VARIANT IN OUT STATE

``udf``: ``parse`` is a Python UDF raising ``ValueError`` on a value it cannot parse
(the rest as ``examples/payments.py``: totals, windows, errors). ``keyed``: ``parse``
casts with ``try_cast`` (a bad value becomes null) and a ``stateful`` per user keeps
the running totals, raising when a row of the epoch has a null amount or time, so
the user's rows of that epoch are set aside together (totals and errors only).
"""

from __future__ import annotations

import sys
from datetime import datetime

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, TimestampType

from falkirk.demo.payments import CSV_OPTIONS, RAW_SCHEMA, build_pipeline
from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine


@F.udf(LongType())
def amount_of(text: str) -> int:
    value = int(text)  # ValueError: invalid literal for int() ...
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"amount {text} does not fit in 64 bits")
    return value


@F.udf(TimestampType())
def time_of(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")  # ValueError: time data ... does not match


def parse_in_python(df: DataFrame) -> DataFrame:
    return df.select("user", amount_of("amount").alias("amount"), time_of("ts").alias("ts"))


def parse_leniently(df: DataFrame) -> DataFrame:
    return df.select(
        "user",
        F.expr("try_cast(amount AS bigint)").alias("amount"),
        F.expr("try_cast(ts AS timestamp)").alias("ts"),
        F.col("amount").alias("amount_text"),
        F.col("ts").alias("ts_text"),
    )


def running_totals(user: str, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    bad = rows[rows["amount"].isna() | rows["ts"].isna()]
    if len(bad):
        raise ValueError(f"user {user} has a payment that cannot be read: {bad['amount_text'].iloc[0]!r}")
    n = int(state["n"].iloc[0]) if len(state) else 0
    total = int(state["total"].iloc[0]) if len(state) else 0
    n, total = n + len(rows), total + int(rows["amount"].sum())
    return pd.DataFrame({"user": [user], "n": [n], "total": [total]}), pd.DataFrame({"n": [n], "total": [total]})


def keyed_pipeline(input_dir: str, output_dir: str) -> Pipeline:
    p = Pipeline("payments_keyed")
    raw = p.source("payments", FileSource(input_dir, "csv", RAW_SCHEMA, options=CSV_OPTIONS))
    typed = raw.map("parse", parse_leniently)
    totals = typed.exchange("by_user", "user").stateful(
        "totals", "user", running_totals, state_schema="n long, total long", output_schema="user string, n long, total long", policy=EagerCheckpoint()
    )
    totals.sink("totals_out", ParquetTableSink(f"{output_dir}/totals"))
    totals.errors().sink("errors", ParquetTableSink(f"{output_dir}/errors", epoch_column=None))
    return p


def main(variant: str, input_dir: str, output_dir: str, storage: str) -> int:
    if variant == "udf":
        pipeline = build_pipeline(input_dir, output_dir, parse=parse_in_python)
    else:
        pipeline = keyed_pipeline(input_dir, output_dir)
    Engine(pipeline, storage).run(finish=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
