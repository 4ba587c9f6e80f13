"""A keyed pipeline over many epochs: the per-epoch time and the metadata stay flat
(finding 8 of the data-loss review: epoch times doubled after ~20 epochs, and runs of
12 epochs never showed it), and the output is exact at the end. The storage root is a
``file://`` URI, so every commit is published as a copy of the metadata: the copies
must stay as small as the metadata (finding 6: they grew with the run)."""

from __future__ import annotations

import statistics
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import ParquetTableSink, keyed_generator
from falkirk.runtime import Engine
from falkirk.testing.verify import differences

pytestmark = pytest.mark.slow

EPOCHS = 48


def published_bytes(root: Path) -> int:
    """Size of the newest published metadata copy."""
    return max(root.glob("_meta/meta-*.sqlite")).stat().st_size


def test_epoch_time_and_metadata_stay_flat_over_many_epochs(spark: SparkSession, tmp_path: Path) -> None:
    source = keyed_generator(batches=EPOCHS, rows_per_batch=3000, keys=500, seed=4)
    p = Pipeline("long")
    (
        p.source("src", source)
        .aggregate("agg", "key", {"n": ("count", None), "total": ("sum", "value")}, policy=LazyCheckpoint(every=5))
        .sink("out", ParquetTableSink(str(tmp_path / "out")))
    )
    sizes: dict[int, int] = {}

    def on_epoch(epoch: int, seconds: float, __: object) -> None:
        assert seconds < 60, f"epoch {epoch} took {seconds:.0f} s"  # fail fast, not after hours
        if epoch in (20, EPOCHS - 1):
            sizes[epoch] = published_bytes(tmp_path / "state")

    root = f"file://{tmp_path / 'state'}"
    report = Engine(p, root, spark=spark, metadata_dir=tmp_path / "meta", on_epoch=on_epoch).run()
    assert report.epochs == list(range(1, EPOCHS + 1))
    # Per-epoch cost: the interval between successive commits (epochs overlap).
    finished = report.step_finished["agg"]
    intervals = [b - a for a, b in pairwise(finished)]
    early, late = statistics.median(intervals[5:25]), statistics.median(intervals[-20:])
    assert late < 2.0 * early + 0.3, f"per-epoch time grew from {early:.2f} s to {late:.2f} s"
    assert max(intervals[-20:]) < 10 * early + 3, intervals[-20:]
    assert sizes[EPOCHS - 1] <= sizes[20] * 1.3, sizes
    # and the result is exact: every key's running totals in every epoch it changed
    rows = source.batch(spark, 0).withColumn("epoch", F.lit(1))
    for b in range(1, EPOCHS):
        rows = rows.unionByName(source.batch(spark, b).withColumn("epoch", F.lit(b + 1)))
    per_epoch = rows.groupBy("key", "epoch").agg(F.count(F.lit(1)).alias("c"), F.sum("value").alias("s"))
    so_far = Window.partitionBy("key").orderBy("epoch")
    want = per_epoch.select(
        "key",
        F.sum("c").over(so_far).alias("n"),
        F.sum("s").over(so_far).alias("total"),
        F.col("epoch").cast("long").alias("epoch"),
    ).toPandas()
    assert differences(pd.read_parquet(tmp_path / "out"), want[["key", "n", "total", "epoch"]]) == []
