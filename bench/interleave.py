"""Interleaved loops against loops that take epochs in order, on the same input.

    .venv/bin/python bench/interleave.py --runs 3 --epochs 8 --in-flight 3

The workload is :mod:`falkirk.demo.halving` (the paper's Figure 3, Select -> Sum ->
Buffer, inside a loop that halves numbers until they reach 1): epochs alternate
between long ones (numbers near 2^20: 21 iterations) and short ones (3 iterations).
Each round runs, in one Spark session, the same pipeline built

* ``in-order`` - ``iterate(interleave=False)``: epoch e + 1's first iteration runs
  after epoch e's last;
* ``interleaved`` - ``iterate(interleave=True)``: the epochs in flight (up to
  ``--in-flight``) iterate together, one iteration of each per round, side by side.

For each: the run's wall time, and the mean time from an epoch's start (its plan) to
its commit. Every run's output is checked against the plain-Python result. Medians
over ``--runs`` rounds; results in ``bench/results/interleave.csv``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd

from bench.tables import medians, print_medians, show, write_csv
from falkirk.demo.halving import build
from falkirk.runtime import Engine
from falkirk.spark import spark_session
from falkirk.testing.halving import expected, write
from falkirk.testing.verify import differences

CONFIGS = {"in-order": False, "interleaved": True}


def epochs_of(count: int) -> list[list[int]]:
    """Long and short epochs in turn: 21 iterations, then 3."""
    return [[2**20 + e, 3 * 2**18 + e, 777] if e % 2 == 0 else [5 + e % 3, 3] for e in range(count)]


def run_once(spark: Any, numbers: Path, epochs: list[list[int]], interleave: bool, in_flight: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="falkirk-bench-interleave-"))
    try:
        engine = Engine(build(str(numbers), str(work / "out"), interleave=interleave), work / "state", spark=spark, max_in_flight=in_flight)
        started = time.perf_counter()
        report = engine.run()
        seconds = time.perf_counter() - started
        wrong = differences(pd.read_parquet(work / "out")[["total", "epoch"]].astype("int64"), expected(epochs), name="output")
        if wrong:
            raise AssertionError(f"interleave={interleave}: wrong output: {wrong[:3]}")
        return {
            "seconds": seconds,
            "epoch_latency_s": statistics.mean(report.epoch_seconds),
            "interleaved_epochs": float(len(report.interleaved)),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "interleave.csv"))
    args = parser.parse_args()
    spark = spark_session()
    numbers = Path(tempfile.mkdtemp(prefix="falkirk-bench-numbers-"))
    epochs = epochs_of(args.epochs)
    write(numbers, epochs)
    run_once(spark, numbers, epochs, True, args.in_flight)  # warm-up: JIT, Python workers
    rows: list[dict[str, Any]] = []
    for r in range(args.runs):
        order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))  # neither always runs first
        for config in order:
            row = {"round": r, "config": config, **run_once(spark, numbers, epochs, CONFIGS[config], args.in_flight)}
            rows.append(row)
            show(row)
    write_csv(rows, args.out)
    print_medians(medians(rows, CONFIGS, ("seconds", "epoch_latency_s", "interleaved_epochs")))
    ratios = [
        next(r["seconds"] for r in rows if r["round"] == k and r["config"] == "in-order")
        / next(r["seconds"] for r in rows if r["round"] == k and r["config"] == "interleaved")
        for k in range(args.runs)
    ]
    print(f"  in-order / interleaved wall time, per round: {', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}")
    shutil.rmtree(numbers, ignore_errors=True)


if __name__ == "__main__":
    main()
