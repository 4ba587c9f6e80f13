"""What a bad row costs: the payments pipeline with and without poison rows, side by
side in one Spark session.

    .venv/bin/python bench/bad_rows.py --files 6 --runs 3

``examples/payments.py``'s pipeline (``parse`` casts under ANSI mode; totals, windows
and the rows set aside written as Parquet) over seeded inputs of ``--files`` epochs:
for each epoch size (``--rows``), a clean input and inputs with 1 bad row per epoch
and 1% bad rows per epoch. Configurations are interleaved in every round; each run's
whole output is checked against plain Python (:mod:`falkirk.testing.payments`).
Reported per configuration: the median run time, its extra time over the clean input
of the same size, that extra time per bad row, and the tries the search ran (Spark
jobs over parts of an epoch's input). Results in ``bench/results/bad_rows.csv``.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

import falkirk.execution.isolation as isolation
from falkirk.demo.payments import ERRORS_COLUMNS, TOTALS_COLUMNS, build_pipeline
from falkirk.runtime import Engine
from falkirk.spark import spark_session
from falkirk.testing.payments import expected, write_input

RESULTS = Path(__file__).resolve().parent / "results" / "bad_rows.csv"


class TryCounter:
    """Counts the isolation's tries (each a Spark job)."""

    def __init__(self) -> None:
        self.tries = 0
        self._real = isolation._try

    def __enter__(self) -> TryCounter:
        def counted(*args: object, **kwargs: object) -> str | None:
            self.tries += 1
            return self._real(*args, **kwargs)  # type: ignore[arg-type]

        isolation._try = counted  # type: ignore[assignment]
        return self

    def __exit__(self, *_: object) -> None:
        isolation._try = self._real  # type: ignore[assignment]


def run_once(spark: object, inputs: Path, work: Path) -> tuple[float, int, int]:
    """One run to the end of ``inputs``: (seconds, rows set aside, tries); the output is checked."""
    shutil.rmtree(work, ignore_errors=True)
    with TryCounter() as counter:
        started = time.perf_counter()
        Engine(build_pipeline(str(inputs), str(work / "out")), work / "state", spark=spark).run(finish=True)  # type: ignore[arg-type]
        seconds = time.perf_counter() - started
    want = expected(inputs)
    totals = pd.read_parquet(work / "out" / "totals")[TOTALS_COLUMNS]
    assert sorted(map(tuple, totals.values.tolist())) == want.totals, "totals differ from plain Python"
    errors = pd.read_parquet(work / "out" / "errors")[ERRORS_COLUMNS] if (work / "out" / "errors").exists() else pd.DataFrame(columns=ERRORS_COLUMNS)
    assert sorted((u, a, t) for u, a, t, _, _ in errors.values.tolist()) == want.errors, "rows set aside differ from plain Python"
    return seconds, len(want.errors), counter.tries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--rows", type=int, nargs="+", default=[300, 3000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session("local[2]")
    scratch = Path(tempfile.mkdtemp(prefix="falkirk-bad-rows-"))
    configs: list[tuple[int, str, float]] = []
    for rows in args.rows:
        configs += [(rows, "clean", 0.0), (rows, "1 per epoch", 1 / rows), (rows, "1%", 0.01)]
    for rows, name, share in configs:
        write_input(scratch / f"in-{rows}-{name}", files=args.files, rows=rows, bad_share=share, seed=11)
    run_once(spark, scratch / f"in-{configs[0][0]}-clean", scratch / "warm")  # JIT and caches
    times: dict[tuple[int, str], list[float]] = {}
    found: dict[tuple[int, str], tuple[int, int]] = {}
    for _ in range(args.runs):
        for rows, name, _share in configs:
            seconds, bad, tries = run_once(spark, scratch / f"in-{rows}-{name}", scratch / "work")
            times.setdefault((rows, name), []).append(seconds)
            found[(rows, name)] = (bad, tries)
            print(f"  {rows} rows/epoch, {name}: {seconds:.1f} s, {bad} bad rows, {tries} tries", flush=True)
    out = []
    for rows, name, _share in configs:
        median = statistics.median(times[(rows, name)])
        clean = statistics.median(times[(rows, "clean")])
        bad, tries = found[(rows, name)]
        extra = median - clean
        out.append({
            "rows_per_epoch": rows,
            "epochs": args.files,
            "input": name,
            "bad_rows": bad,
            "median_seconds": round(median, 2),
            "extra_seconds": round(extra, 2),
            "seconds_per_bad_row": round(extra / bad, 3) if bad else "",
            "tries": tries,
            "tries_per_bad_row": round(tries / bad, 1) if bad else "",
        })
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(out[0]))
        writer.writeheader()
        writer.writerows(out)
    for row in out:
        print(row)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
