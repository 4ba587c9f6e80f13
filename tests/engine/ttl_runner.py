"""Runs a pipeline whose keys expire (a subprocess for crash tests).

    python ttl_runner.py OUT STATE EPOCHS

The generator of :mod:`falkirk.testing.expiring` (two new keys an epoch, an
``r`` key back every sixth, a ``q`` key every second; event time ``10 e``) feeds,
after one exchange, a window (tumbling windows of 200, ``ttl=4`` epochs, lazy
checkpoints every 3) and an aggregate (count and sum, ``ttl=5``, eager
checkpoints). Each output and each ``expired()`` goes to a Parquet table under OUT.
"""

from __future__ import annotations

import sys

from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline, Tumbling
from falkirk.io import ParquetTableSink
from falkirk.io.generators import GeneratorSource
from falkirk.runtime import Engine
from falkirk.testing.expiring import NEW, SIZE, generate

WINDOW_TTL, AGGREGATE_TTL = 4, 5
TABLES = ("windows", "windows_expired", "counts", "counts_expired")


def build(output: str, epochs: int) -> Pipeline:
    p = Pipeline("ttl-chain")
    rows = p.source("gen", GeneratorSource("k string, t long, v long", epochs, generate, NEW + 2)).exchange("by_k", "k")
    win = rows.window("win", "k", "t", Tumbling(SIZE), {"n": ("count", None), "s": ("sum", "v")}, policy=LazyCheckpoint(every=3), ttl=WINDOW_TTL)
    counts = rows.aggregate("counts", "k", {"n": ("count", None), "s": ("sum", "v")}, policy=EagerCheckpoint(compact_every=4), ttl=AGGREGATE_TTL)
    for name, stream in (("windows", win), ("windows_expired", win.expired()), ("counts", counts), ("counts_expired", counts.expired())):
        stream.sink(f"{name}_out", ParquetTableSink(f"{output}/{name}"))
    return p


def main(output: str, storage: str, epochs: int) -> int:
    Engine(build(output, epochs), storage).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
