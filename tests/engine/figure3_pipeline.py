"""The paper's Figure 3 as a pipeline: Select -> Sum -> Buffer (also a subprocess).

    python figure3_pipeline.py IN OUT STATE SLOW_EPOCH

Words arrive one file per epoch; ``select`` turns each into a number (its length) -
and takes its time over epoch SLOW_EPOCH, so that the next epoch, in flight at the
same time, reaches ``buffer`` first; ``sum`` adds an epoch's numbers (stateless: its
per-epoch sum is sent when the epoch is complete, and nothing is kept); ``buffer``
keeps every sum it has seen, partitioned by epoch, checkpointed eagerly - and so
selectively - and passes it on to the sink.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine


def build(inp: str, out: str, slow_epoch: int) -> Pipeline:
    def select(df: DataFrame, epoch: int) -> DataFrame:
        if epoch == slow_epoch:
            time.sleep(6)  # the epoch is late: the next one overtakes it
        return df.select(F.length("word").cast("long").alias("n"))

    p = Pipeline("figure3")
    words = p.source("words", FileSource(inp, "csv", "word string", options={"header": "true"}))
    sums = words.map("select", select).map("sum", lambda df: df.agg(F.coalesce(F.sum("n"), F.lit(0)).alias("total")))
    sums.buffer("buffer", policy=EagerCheckpoint(compact_every=10)).sink("out", ParquetTableSink(out))
    return p


def write(directory: Path, epochs: list[list[str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for e, words in enumerate(epochs):
        (directory / f"words-{e:03d}.csv").write_text("word\n" + "".join(w + "\n" for w in words))


if __name__ == "__main__":
    inp, out, state, slow = sys.argv[1:5]
    Engine(build(inp, out, int(slow)), state).run()
