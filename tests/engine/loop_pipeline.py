"""A small loop for the engine's tests (also run as a subprocess for crash tests).

    python loop_pipeline.py IN OUT STATE POLICY [MAX_ITERATIONS]

Rows ``k,n`` enter loop ``countdown``; each goes around ``n + 1`` times (its
``m`` counting down from n to 0); ``steps`` counts, per key, every row it has seen in
any iteration of any epoch so far (an aggregate with POLICY: ``eager``, ``lazy:K``
or ``stateless``); per epoch the output has each key touched with its count after
the epoch's last iteration.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F

from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline, Policy, Stateless
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine


def policy(spec: str) -> Policy:
    name, _, arg = spec.partition(":")
    if name == "lazy":
        return LazyCheckpoint(every=int(arg or 2), compact_every=2)
    return {"eager": EagerCheckpoint(compact_every=3), "stateless": Stateless()}[name]


def build(
    inp: str, out: str, steps: Policy, max_iterations: int = 1000, *, log_feedback: bool = False, log_union: bool = False
) -> Pipeline:
    """The pipeline; ``log_feedback`` / ``log_union``: the feedback / the union that
    starts each iteration log what they send (``LogOutputs``)."""
    from falkirk.graph import LogOutputs

    p = Pipeline("countdown")
    rows = p.source("rows", FileSource(inp, "csv", "k long, n long", options={"header": "true"}))
    loop = p.iterate("countdown", max_iterations=max_iterations)
    again = loop.feedback("again", schema="k long, m long", policy=LogOutputs() if log_feedback else None)
    entering = loop.enter("enter", rows.map("start", lambda df: df.select("k", F.col("n").alias("m"))))
    here = entering.union("here", again, policy=LogOutputs() if log_union else None)
    counted = here.aggregate("steps", "k", {"count": ("count", None)}, policy=steps)
    loop.connect(again, here.map("down", lambda df: df.filter("m > 0").select("k", (F.col("m") - 1).alias("m"))))
    left = loop.leave("leave", counted)
    left.map("last", lambda df: df.groupBy("k").agg(F.max("count").alias("count"))).sink("out", ParquetTableSink(out))
    return p


def write(directory: Path, epochs: list[list[tuple[int, int]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for e, rows in enumerate(epochs):
        (directory / f"rows-{e:03d}.csv").write_text("k,n\n" + "".join(f"{k},{n}\n" for k, n in rows))


def expected(epochs: list[list[tuple[int, int]]], max_iterations: int = 1000) -> pd.DataFrame:
    """Per epoch, each key it touched with its running count of loop visits."""
    total: dict[int, int] = {}
    out = []
    for e, rows in enumerate(epochs, start=1):
        for k, n in rows:
            total[k] = total.get(k, 0) + min(n + 1, max_iterations)
        out += [(k, total[k], e) for k in sorted({k for k, _ in rows})]
    return pd.DataFrame(out, columns=["k", "count", "epoch"]).astype("int64")


if __name__ == "__main__":
    inp, out, state, spec = sys.argv[1:5]
    limit = int(sys.argv[5]) if len(sys.argv) > 5 else 1000  # then flags: log_union, log_feedback
    flags = sys.argv[6:]
    Engine(build(inp, out, policy(spec), limit, log_union="log_union" in flags, log_feedback="log_feedback" in flags), state).run()
