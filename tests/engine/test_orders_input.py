"""The orders example on awkward input, in process: a lone carriage return inside a
line, bytes that are not UTF-8, and figures that overflow 64 bits (adversarial
review of the general-graphs issue)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.orders import build_pipeline
from falkirk.runtime import Engine
from falkirk.spark.errors import DataError
from falkirk.testing.orders import batch_expected, expected
from falkirk.testing.verify import differences

HEADERS = ("order_id,customer_id,amount_cents,ts\n", "payment_id,order_id,amount_cents,ts\n")


def write(root: Path, orders: list[bytes], payments: list[bytes]) -> tuple[str, str]:
    for name, files, header in (("orders", orders, HEADERS[0]), ("payments", payments, HEADERS[1])):
        (root / name).mkdir(parents=True)
        for i, body in enumerate(files):
            (root / name / f"part-{i:04d}.csv").write_bytes(header.encode() + body)
    return str(root / "orders"), str(root / "payments")


def run(root: Path, spark: SparkSession, orders: str, payments: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    pipeline = build_pipeline(orders, payments, str(root / "out"), str(root / "rej"))
    Engine(pipeline, str(root / "state"), spark=spark).run()
    return pd.read_parquet(root / "out"), pd.read_parquet(root / "rej")


def test_odd_line_ends_and_bytes_are_rejected_as_the_references_say(spark: SparkSession, tmp_path: Path) -> None:
    orders, payments = write(
        tmp_path,
        [b"o1,c1,500,1\no8,c3,5\r,1\r\no\xff,c1,7,2\n", b"o2,c2,100,3\n"],
        [b"p1,o\xfe,100,1\np2,o1,200,1\n"],
    )
    out, rejected = run(tmp_path, spark, orders, payments)
    plain, batch = expected(orders, payments), batch_expected(spark, orders, payments)
    assert differences(batch.output, plain.output) == [] and differences(batch.rejected, plain.rejected) == []
    assert differences(out, plain.output) == []
    assert differences(rejected[["input", "raw"]], plain.rejected) == []
    assert sorted(rejected["raw"]) == ["o8,c3,5\r,1", "o\ufffd,c1,7,2", "p1,o\ufffd,100,1"]
    assert set(rejected.loc[rejected["raw"].str.contains("\ufffd"), "reason"]) == {"not valid UTF-8"}
    assert out[out.customer_id == "c1"][["orders", "paid_cents", "epoch"]].values.tolist() == [[1, 200, 1]]


def test_figures_that_overflow_stop_with_an_error_naming_the_processor(spark: SparkSession, tmp_path: Path) -> None:
    """The sum overflows in the map 'changes' (its per-epoch groupBy), not where the
    plan ran (the aggregate's merge): the error names it, and its input file. (A sum
    carries no query context, so no line is named.)"""
    big = str(2**63 - 1).encode()
    orders, payments = write(tmp_path, [b"o1,c1," + big + b",1\no2,c1," + big + b",2\n"], [])
    with pytest.raises(OverflowError):
        expected(orders, payments)
    with pytest.raises(DataError, match=r"processor 'changes' failed on epoch 1's data: \[ARITHMETIC_OVERFLOW\].*\(a map; input: orders: part-0000.csv\)"):
        run(tmp_path, spark, orders, payments)
