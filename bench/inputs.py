"""Benchmark input: generated once with Falkirk's seeded generators and written as
files, so that every system reads byte-identical input. CSV throughout (W2 without a
header line): the one format every system here reads - PyFlink's pip package has no
Parquet format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from falkirk.io import clickstream_generator, keyed_generator


@dataclass(frozen=True)
class Sizes:
    """How much input each workload gets (``--quick`` shrinks it)."""

    w1_batches: int = 12
    w1_sessions_per_batch: int = 3000
    w1_users: int = 10_000
    w2_batches: int = 12
    w2_rows_per_batch: int = 250_000
    w2_keys: int = 1_000_000

    @property
    def w1_rows(self) -> int:
        return self.w1_batches * self.w1_sessions_per_batch * 7 // 2

    @property
    def w2_rows(self) -> int:
        return self.w2_batches * self.w2_rows_per_batch


QUICK = Sizes(w1_batches=6, w1_sessions_per_batch=1000, w1_users=2000, w2_batches=6, w2_rows_per_batch=50_000, w2_keys=100_000)


def prepare(spark: SparkSession, data: Path, sizes: Sizes) -> dict[str, Path]:
    """Write the inputs under ``data`` (reused when the sizes match) and return the
    directory of each workload."""
    tag = f"w1-{sizes.w1_batches}x{sizes.w1_sessions_per_batch}-u{sizes.w1_users}"
    w1 = data / tag
    if not w1.exists():
        gen = clickstream_generator(
            batches=sizes.w1_batches, sessions_per_batch=sizes.w1_sessions_per_batch, users=sizes.w1_users, seed=1
        )
        gen.write_files(spark, str(w1.with_suffix(".tmp")), format="csv")
        w1.with_suffix(".tmp").rename(w1)
    tag = f"w2-{sizes.w2_batches}x{sizes.w2_rows_per_batch}-k{sizes.w2_keys}-csv"
    w2 = data / tag
    if not w2.exists():
        gen = keyed_generator(batches=sizes.w2_batches, rows_per_batch=sizes.w2_rows_per_batch, keys=sizes.w2_keys, seed=2)
        gen.write_files(spark, str(w2.with_suffix(".tmp")), format="csv", header=False)
        w2.with_suffix(".tmp").rename(w2)
    return {"w1": w1, "w2": w2}


def prepare_state_sizes(spark: SparkSession, data: Path, keys: int, epochs: int, rows_per_epoch: int) -> Path:
    """Input for the per-epoch cost at ``keys`` keys of state: one file that fills the
    state (every key once, written first: Structured Streaming orders files by
    modification time, Falkirk by name) then ``epochs`` files of ``rows_per_epoch``
    rows over the same keys."""
    directory = data / f"state-k{keys}-{epochs}x{rows_per_epoch}-csv"
    if directory.exists():
        return directory
    tmp = directory.with_suffix(".tmp")
    fill = spark.range(keys).selectExpr("CONCAT(id, ',0') AS value")
    fill.coalesce(1).write.text(str(tmp / "_fill"))
    tmp.mkdir(parents=True, exist_ok=True)
    part = next((tmp / "_fill").glob("part-*"))
    part.rename(tmp / "a-fill.csv")
    for leftover in (tmp / "_fill").iterdir():
        leftover.unlink()
    (tmp / "_fill").rmdir()
    gen = keyed_generator(batches=epochs, rows_per_batch=rows_per_epoch, keys=keys, seed=3)
    gen.write_files(spark, str(tmp), format="csv", header=False)
    tmp.rename(directory)
    return directory
