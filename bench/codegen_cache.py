"""Spark's cache of generated code: how many classes a run compiles, and what that costs.

    .venv/bin/python bench/codegen_cache.py --rounds 2 --runs 3

Spark compiles the Java code it generates for each plan (Janino) and keeps the last
``spark.sql.codegen.cache.maxEntries`` classes (100 by default). The windowed example
needs about 120 of them per epoch, so with 100 every epoch compiled them all again.
Falkirk's session sets 4000. Each setting runs in its own driver (the setting is
fixed when a JVM starts): ``--runs`` runs of the windowed example (sliding windows,
8 epochs of 30 rows, continuous eventual checkpoints) one after the other on fresh
storage roots, the first cold, the rest warm. Settings alternate over ``--rounds``
rounds. Every run's whole output is compared with the plain-Python reference, and the
number of compiles is read from Spark's own codegen metrics. Prints the medians per
setting, run by run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = {"spark default (100)": "100", "falkirk (4000)": "4000"}
SHAPE, DELAY = (20, 5, None), 10  # sliding windows of 20 every 5, watermark 10 behind


def child(entries: str, runs: int) -> None:
    """One driver: ``runs`` runs with the cache at ``entries``; prints one JSON line."""
    import pandas as pd

    from falkirk.demo.windowed import OUTPUT_COLUMNS, build_pipeline, policy_named, shape_of
    from falkirk.runtime import Engine
    from falkirk.spark import spark_session
    from falkirk.testing.windowed import expected, read_input, write_input

    spark = spark_session(conf={"spark.sql.codegen.cache.maxEntries": entries})
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="falkirk-codegen-"))
    write_input(work / "in", epochs=7, rows=30, seed=5, spread=25, step=8)
    shape = shape_of(*SHAPE)
    want = expected(read_input(work / "in"), shape, DELAY).windows
    seconds, compiles = [], []
    for run in range(runs):
        before = int(metrics.METRIC_COMPILATION_TIME().getCount())
        started = time.perf_counter()
        pipeline = build_pipeline(str(work / "in"), str(work / f"out{run}"), shape, DELAY, policy_named("cec"))
        Engine(pipeline, work / f"state{run}", spark=spark).run(finish=True)
        seconds.append(time.perf_counter() - started)
        compiles.append(int(metrics.METRIC_COMPILATION_TIME().getCount()) - before)
        got = sorted(pd.read_parquet(work / f"out{run}")[OUTPUT_COLUMNS].itertuples(index=False, name=None))
        if got != want:
            raise SystemExit(f"run {run} with maxEntries={entries}: the output differs from the reference")
    print(json.dumps({"seconds": seconds, "compiles": compiles}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="runs per driver (the first is cold)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.runs)
        return
    results: dict[str, list[dict[str, list[float]]]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name, entries in SETTINGS.items():
            out = subprocess.run(
                [sys.executable, __file__, "--child", entries, "--runs", str(args.runs)], capture_output=True, text=True, check=True
            )
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"windowed example, {args.runs} runs per driver, medians of {args.rounds} rounds (every output checked)")
    print(f"{'setting':22} " + "  ".join(f"run {r + 1}: s / compiles" for r in range(args.runs)))
    for name, rounds in results.items():
        cells = []
        for r in range(args.runs):
            s = statistics.median(x["seconds"][r] for x in rounds)
            c = statistics.median(x["compiles"][r] for x in rounds)
            cells.append(f"{s:6.1f} / {c:5.0f}      ")
        print(f"{name:22} " + "  ".join(cells))


if __name__ == "__main__":
    main()
