"""What the hash of each input file costs (``FileSource(hash_content=...)``), and what
a replay over input files put back costs, side by side in one Spark session.

    .venv/bin/python bench/content_hashes.py --batches 8 --rows 250000 --runs 3

W2 (count, sum and max per key over CSV files, ``LazyCheckpoint(every=4)``, every
changed key per epoch to Parquet), run to the end of the input with and without the
hashes (one Spark job per epoch in the background: Python tasks hashing local files in 1 MiB chunks), interleaved in every
round; and the same with a fan-out (a map whose output two branches read, the second
writing every hundredth row). Then the restart cost: a run stopped after
``--batches - 1`` epochs (its checkpoint 2 epochs behind) restarts and finishes, once
with its input as it was and once with every input file deleted and written anew (new
modification times: each replayed epoch hashes its files once more). Every run's
result is checked against one plain Spark batch job over the same files. Results in
``bench/results/content_hashes.csv``.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink, keyed_generator
from falkirk.runtime import Engine
from falkirk.spark import spark_session

RESULTS = Path(__file__).resolve().parent / "results" / "content_hashes.csv"
SCHEMA = "key long, value long"
AGGREGATES = {"count": ("count", None), "sum": ("sum", "value"), "max": ("max", "value")}


def pipeline(input: Path, out: Path, hashed: bool) -> Pipeline:
    p = Pipeline("w2")
    (
        p.source("events", FileSource(str(input), "csv", SCHEMA, hash_content=hashed))
        .aggregate("per_key", "key", AGGREGATES, policy=LazyCheckpoint(every=4))
        .sink("out", ParquetTableSink(str(out)))
    )
    return p


def fan_out(input: Path, out: Path, hashed: bool) -> Pipeline:
    p = Pipeline("w2-fan-out")
    typed = p.source("events", FileSource(str(input), "csv", SCHEMA, hash_content=hashed)).map(
        "typed", lambda df: df.withColumn("value", F.col("value") + F.lit(0))
    )
    typed.aggregate("per_key", "key", AGGREGATES, policy=LazyCheckpoint(every=4)).sink("out", ParquetTableSink(str(out)))
    typed.map("hundredth", lambda df: df.filter(F.col("value") % 100 == 0)).sink("sample", ParquetTableSink(str(out.parent / "sample")))
    return p


def check(spark: SparkSession, input: Path, out: Path) -> None:
    """The last row of each key in the output equals one batch job's aggregate."""
    batch = spark.read.schema(SCHEMA).csv(str(input)).groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"), F.max("value").alias("max")
    )
    rows = spark.read.parquet(str(out))
    latest = rows.groupBy("key").agg(F.max("epoch").alias("epoch")).join(rows, ["key", "epoch"]).drop("epoch")
    differ = latest.exceptAll(batch).count() + batch.exceptAll(latest).count()
    assert differ == 0, f"{differ} rows differ from the batch job"
    sample = out.parent / "sample"
    if sample.exists():  # the fan-out's second branch
        want = spark.read.schema(SCHEMA).csv(str(input)).filter(F.col("value") % 100 == 0)
        got = spark.read.parquet(str(sample)).select("key", "value")
        assert got.exceptAll(want).count() + want.exceptAll(got).count() == 0, "the sample differs from the batch job"


def put_back(input: Path) -> None:
    """Every input file deleted and written anew: same bytes, new modification time."""
    for path in sorted(input.glob("*.csv")):
        content = path.read_bytes()
        path.unlink()
        path.write_bytes(content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session("local[2]")
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-hashes-"))
    input = scratch / "in"
    keyed_generator(batches=args.batches, rows_per_batch=args.rows, keys=args.keys, seed=2).write_files(spark, str(input), format="csv", header=False)
    times: dict[str, list[float]] = {}

    def timed(label: str, engine: Engine, **run: object) -> None:
        started = time.perf_counter()
        engine.run(**run)  # type: ignore[arg-type]
        times.setdefault(label, []).append(time.perf_counter() - started)

    for round_no in range(args.runs):
        for shape, build in (("", pipeline), ("fan-out ", fan_out)):
            for hashed in (True, False):
                work = scratch / f"run-{hashed}"
                shutil.rmtree(work, ignore_errors=True)
                label = f"{shape}whole run, {'hashes' if hashed else 'no hashes'}"
                timed(label, Engine(build(input, work / "out", hashed), work / "state", spark=spark))
                check(spark, input, work / "out")
        for restored in (False, True):
            work = scratch / f"restart-{restored}"
            shutil.rmtree(work, ignore_errors=True)
            Engine(pipeline(input, work / "out", True), work / "state", spark=spark).run(max_epochs=args.batches - 1)
            if restored:
                put_back(input)
            label = "restart, files put back" if restored else "restart, files as they were"
            timed(label, Engine(pipeline(input, work / "out", True), work / "state", spark=spark))
            check(spark, input, work / "out")
        print(f"round {round_no + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    rows = [{"configuration": k, "median_seconds": round(statistics.median(v), 3), "runs": len(v)} for k, v in times.items()]
    for shape in ("", "fan-out "):
        rows.append({
            "configuration": f"{shape}hash cost, share of a whole run",
            "median_seconds": round(statistics.median(times[f"{shape}whole run, hashes"]) / statistics.median(times[f"{shape}whole run, no hashes"]) - 1, 4),
            "runs": args.runs,
        })
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["configuration", "median_seconds", "runs"])
        writer.writeheader()
        writer.writerows(rows)
    for r in rows:
        print(f"{r['configuration']:<40} {r['median_seconds']}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
