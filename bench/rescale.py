"""The cost of an epoch after a rescale, against a root created with the new number.

    .venv/bin/python bench/rescale.py --epochs 30 --rows 20000 --keys 20000 --before 4 --after 16 [--rounds 2]

A keyed aggregate (count and sum, eager checkpoints) over a seeded generator, one
batch per epoch. ``rescaled``: a root created with ``--before`` state partitions runs
the first third of the epochs, then the same root runs the rest with ``--after``
(``Engine(parallelism=)``: the state is re-partitioned as it is restored). ``fresh``:
a root created with ``--after`` runs all the epochs. Rounds interleave the two.
Prints the median time per epoch (the interval between commits) over the epochs
after the rescale point in each, their ratio, and checks that both roots end with
the same state (read back with ``read_state``, compared row for row).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from pyspark.sql import SparkSession

from falkirk import read_state
from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import MemorySink, keyed_generator
from falkirk.runtime import Engine
from falkirk.spark import spark_session


def pipeline(epochs: int, rows: int, keys: int) -> Pipeline:
    p = Pipeline("rescale")
    source = p.source("src", keyed_generator(batches=epochs, rows_per_batch=rows, keys=keys, seed=3))
    source.aggregate("agg", "key", {"n": ("count", None), "s": ("sum", "value")}, policy=EagerCheckpoint()).sink("out", MemorySink())
    return p


def run(spark: SparkSession, args: argparse.Namespace, steps: list[tuple[int, int | None]]) -> tuple[list[float], Path]:
    """Run the steps (partitions, epochs) on one new root: the commit intervals of the last step."""
    root = Path(tempfile.mkdtemp(prefix="falkirk-rescale-")) / "state"
    commits: list[float] = []
    for partitions, epochs in steps:
        commits = []
        engine = Engine(pipeline(args.epochs, args.rows, args.keys), root, spark=spark, parallelism=partitions,
                        on_epoch=lambda *_, seen=commits: seen.append(time.perf_counter()))  # fmt: skip
        engine.run(max_epochs=epochs)
    return [b - a for a, b in pairwise(commits)], root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--before", type=int, default=4)
    parser.add_argument("--after", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spark = spark_session()
    first = args.epochs // 3
    rescaled_times: list[float] = []
    fresh_times: list[float] = []
    for _ in range(args.rounds):
        times, rescaled = run(spark, args, [(args.before, first), (args.after, None)])
        rescaled_times += times
        times, fresh = run(spark, args, [(args.after, None)])
        fresh_times += times[first:]
        a = sorted(map(tuple, read_state(spark, str(rescaled), "agg").collect()))
        b = sorted(map(tuple, read_state(spark, str(fresh), "agg").collect()))
        assert a == b and len(a) > 0, "the rescaled root's state differs from the fresh root's"
    r, f = statistics.median(rescaled_times), statistics.median(fresh_times)
    print(f"{args.epochs} epochs of {args.rows} rows over {args.keys} keys; {args.before} -> {args.after} partitions after epoch {first}")
    print(f"median s/epoch after epoch {first}: rescaled {r:.3f}, fresh root with {args.after}: {f:.3f}, ratio {r / f:.2f}")


if __name__ == "__main__":
    main()
