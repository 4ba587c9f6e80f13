"""State time-to-live over a long run of ever-new keys: flat state, flat epochs.

    .venv/bin/python bench/ttl.py --epochs 1000 --new 1000 --ttl 10 [--rounds 1] [--kind aggregate|window]

A generator makes ``--new`` keys per epoch never seen again (sessions, devices that
come and go) plus 100 keys back every 7th epoch; a keyed aggregate (count and sum,
eager checkpoints) runs over them with ``ttl=--ttl`` and, interleaved in the same
process, without one. ``--kind window``: a window instead (count and sum per key in
tumbling windows that never close in the run: the event time is the epoch), whose
keys leave only by their ttl. Per run it prints the median time per epoch (the interval
between commits) in the first and the last tenth of the run, the rows the state's
runs hold at the end (live, superseded and tombstones) and its live keys. Every
run's output is checked: the live keys read back with ``read_state`` and, with a
ttl, the number of expired rows, against the rule computed in plain Python.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from falkirk import read_state
from falkirk.graph import EagerCheckpoint, Pipeline, Tumbling
from falkirk.io.generators import GeneratorSource
from falkirk.runtime import Engine
from falkirk.spark import spark_session

RECURRING, PERIOD = 100, 7


class Counted:
    """A sink that keeps only how many rows each epoch had (``collect`` of a count)."""

    def __init__(self) -> None:
        self.rows = 0

    def prepare(self, empty: DataFrame) -> None:
        return None

    def write(self, df: DataFrame, epoch: int) -> list[object]:
        self.rows += df.count()
        return []


def generate(new: int):  # type: ignore[no-untyped-def]
    def batch(spark: SparkSession, b: int) -> DataFrame:
        return spark.range(new + RECURRING).selectExpr(
            f"CASE WHEN id < {new} THEN concat('n{b}_', id) ELSE concat('r', (id - {new}) * {PERIOD} + {b % PERIOD}) END AS k",
            "id AS v",
            f"CAST({b + 1} AS bigint) AS t",
        )

    return batch


def reference(epochs: int, new: int, ttl: int | None) -> tuple[set[str], int]:
    """The live keys after ``epochs`` and the number of expired rows, in plain Python."""
    last: dict[str, int] = {}
    expired = 0
    for e in range(1, epochs + 1):
        b = e - 1
        touched = {f"n{b}_{i}" for i in range(new)} | {f"r{i * PERIOD + b % PERIOD}" for i in range(RECURRING)}
        if ttl is not None:
            gone = [k for k, t in last.items() if t == e - ttl and k not in touched]
            expired += len(gone)
            for k in gone:
                del last[k]
        for k in touched:
            last[k] = e
    return set(last), expired


def run(spark: SparkSession, epochs: int, new: int, ttl: int | None, kind: str = "aggregate") -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="falkirk-ttl-"))
    out, gone = Counted(), Counted()
    p = Pipeline("ttl")
    rows = p.source("gen", GeneratorSource("k string, v long, t long", epochs, generate(new), new + RECURRING)).exchange("by_k", "k")
    aggregates = {"n": ("count", None), "s": ("sum", "v")}
    if kind == "window":  # one window per key for the whole run: only the ttl removes keys
        counts = rows.window("counts", "k", "t", Tumbling(10**9), aggregates, policy=EagerCheckpoint(), ttl=ttl)
    else:
        counts = rows.aggregate("counts", "k", aggregates, policy=EagerCheckpoint(), ttl=ttl)
    counts.sink("out", out)  # type: ignore[arg-type]
    if ttl is not None:
        counts.expired().sink("expired", gone)  # type: ignore[arg-type]
    commits: list[float] = []
    engine = Engine(p, work / "state", spark=spark, on_epoch=lambda *_: commits.append(time.perf_counter()))
    engine.run()
    state = engine.state.operators["counts"].state
    held = sum(run.count() for run in state.held_runs())
    live, expired = reference(epochs, new, ttl)
    got = {r.k for r in read_state(spark, str(work / "state"), "counts").collect()}
    assert got == live, f"live keys differ: {len(got)} read back, {len(live)} expected"
    assert gone.rows == expired, f"{gone.rows} expired rows, {expired} expected"
    times = [b - a for a, b in pairwise(commits)]
    tenth = max(1, len(times) // 10)
    return {"first": statistics.median(times[:tenth]), "last": statistics.median(times[-tenth:]), "held": held, "live": len(live)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--new", type=int, default=1000, help="new keys per epoch")
    parser.add_argument("--ttl", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kind", choices=("aggregate", "window"), default="aggregate")
    args = parser.parse_args()
    spark = spark_session()
    print(f"{args.kind}: {args.epochs} epochs, {args.new} new keys + {RECURRING} recurring per epoch; ttl={args.ttl} vs none")
    print(f"{'variant':<10} {'s/epoch first 10%':>18} {'last 10%':>9} {'rows held':>10} {'live keys':>10}")
    for _ in range(args.rounds):
        for ttl in (args.ttl, None):
            r = run(spark, args.epochs, args.new, ttl, args.kind)
            name = f"ttl={ttl}" if ttl else "no ttl"
            print(f"{name:<10} {r['first']:>18.3f} {r['last']:>9.3f} {int(r['held']):>10} {int(r['live']):>10}", flush=True)


if __name__ == "__main__":
    main()
