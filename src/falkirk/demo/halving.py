"""Halving: the paper's Figure 3 (Select -> Sum -> Buffer) inside an interleaved loop.

Numbers arrive one file per epoch (header ``n``) and enter loop ``halve``, built
with ``interleave=True``: at iteration i each number is halved again (``n div 2``)
while it is above 1, so an epoch of big numbers takes many iterations and an epoch
of small ones few. In the loop, ``select`` reads the iteration's numbers, ``sum``
adds them (stateless: one row per (epoch, iteration)) and ``buffer`` keeps every
sum, partitioned by its (epoch, iteration) time and checkpointed at each epoch's end
- selectively, since later epochs' sums are in it already. Every sum leaves the loop
to the sink: per epoch, the sum of every iteration. ``tests/engine`` and
``bench/interleave.py`` run it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink

MAX_ITERATIONS = 64


def build(inp: str, out: str, *, interleave: bool = True, poison: int | None = None) -> Pipeline:
    """The pipeline, reading CSV files from ``inp`` and writing Parquet to ``out``.
    ``poison``: a number whose iteration fails (a Spark task error, standing in for
    a step that breaks on one epoch's data)."""

    def select(df: DataFrame) -> DataFrame:
        if poison is None:
            return df.select("n")
        return df.filter(F.assert_true(F.col("n") != poison, f"poisoned: {poison}").isNull()).select("n")

    p = Pipeline("halving")
    numbers = p.source("numbers", FileSource(inp, "csv", "n long", options={"header": "true"}))
    loop = p.iterate("halve", max_iterations=MAX_ITERATIONS, on_limit="fail", interleave=interleave)
    again = loop.feedback("again", schema="n long")
    here = loop.enter("enter", numbers).union("here", again)
    selected = here.map("select", select)
    sums = selected.map("sum", lambda df: df.agg(F.coalesce(F.sum("n"), F.lit(0)).cast("long").alias("total")))
    kept = sums.buffer("buffer", policy=LazyCheckpoint(every=1, compact_every=4))
    loop.connect(again, here.map("halved", lambda df: df.filter("n > 1").select(F.expr("n div 2").alias("n"))))
    loop.leave("leave", kept).sink("out", ParquetTableSink(out))
    return p


#: What moved to :mod:`falkirk.testing.halving` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['expected', 'expected_held', 'iterations', 'write'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.halving", _MOVED)
