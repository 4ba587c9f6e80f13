"""A long run of a keyed pipeline: does an epoch cost the same after hundreds of epochs?

    .venv/bin/python bench/long_run.py --epochs 200 --rows 5000 --keys 2000

A keyed aggregate with ``LazyCheckpoint(every=5)`` over a seeded generator, one batch
per epoch, on a local (or, with ``--uri``, a ``file://``) storage root. Prints the
per-epoch time (the interval between successive commits; epochs overlap) in blocks of
20 epochs, and the size of the metadata as it goes. Before the plan-statistics fix an
epoch's time doubled from epoch ~20 on (minutes per epoch by epoch 26).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import ParquetTableSink, keyed_generator
from falkirk.runtime import Engine
from falkirk.spark import spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--rows", type=int, default=5000, help="rows per epoch")
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--uri", action="store_true", help="a file:// root (metadata published every commit)")
    args = parser.parse_args()
    spark = spark_session()
    work = Path(tempfile.mkdtemp(prefix="falkirk-long-"))
    p = Pipeline("long")
    (
        p.source("src", keyed_generator(batches=args.epochs, rows_per_batch=args.rows, keys=args.keys, seed=1))
        .aggregate("agg", "key", {"n": ("count", None), "s": ("sum", "value")}, policy=LazyCheckpoint(every=5))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    commits: list[float] = []
    sizes: dict[int, int] = {}

    def metadata_bytes() -> int:
        if args.uri:
            return max((work / "state" / "_meta").glob("meta-*.sqlite")).stat().st_size
        return sum(f.stat().st_size for f in (work / "state").glob("meta.sqlite*"))

    def on_epoch(epoch: int, _: float, __: object) -> None:
        commits.append(time.perf_counter())
        if epoch % 20 == 0:
            sizes[epoch] = metadata_bytes()

    root = f"file://{work / 'state'}" if args.uri else str(work / "state")
    extra = {"metadata_dir": work / "meta"} if args.uri else {}
    Engine(p, root, spark=spark, on_epoch=on_epoch, **extra).run()
    intervals = [b - a for a, b in pairwise(commits)]
    print(f"{args.epochs} epochs of {args.rows} rows over {args.keys} keys ({'file:// root' if args.uri else 'local root'})")
    print("epochs      median s/epoch   max    metadata bytes")
    for start in range(0, len(intervals), 20):
        block = intervals[start : start + 20]
        end = start + len(block) + 1
        print(f"{start + 2:4d}-{end:<4d}  {statistics.median(block):8.2f}       {max(block):6.2f}  {sizes.get(end - 1 if (end - 1) % 20 == 0 else 0, '')}")
    first, last = statistics.median(intervals[5:25]), statistics.median(intervals[-20:])
    print(f"median per-epoch time, epochs 7-26: {first:.2f} s; last 20: {last:.2f} s; ratio {last / first:.2f}")


if __name__ == "__main__":
    main()
