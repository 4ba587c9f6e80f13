"""The application of the Falkirk Wheel paper's Figure 1, at a size for 2 cores
(``examples/figure1.py``): four fault-tolerance regimes in one dataflow.

A high-throughput stream of link records ``src,dst,bytes`` and a stream of user
queries ``qid,vertex`` arrive as CSV files, one file of each per epoch::

    links ─ link_lines ─ check_links ─┬─ traffic ─ batch ────────────────────────────┐   (batch)
                                      ├─ undirected ─ [loop cc: propagate ...] ─ components ─┐   (lazy)
                                      └─ (rejected) ─┐                               │        │
    queries ─ query_lines ─ check_queries ─ query ─ with_traffic ◄───────────────────┘        │
                          └─ (rejected) ─┴─ rejected ─ dead_letter      └─ with_component ◄───┘
                                                                               │
        [region stats: number ─ asked ─ regroup] ◄─ in_order ◄─────────────────┘   (eager)
                          ├─ stats_rows ─ stats
                          └─ responses_rows ─ responses

* **Ephemeral** (:class:`~falkirk.graph.Stateless`): parsing, validation and the data
  reductions of the link records (per-epoch bytes per vertex; each link as arrivals at
  its two ends) and of the queries. Nothing inside is persisted: a failure there
  re-reads the sources. What leaves the regime - the reductions' output - is logged
  (:class:`~falkirk.graph.LogOutputs`), as the paper's clients are acknowledged once
  their records are through it: a failure further on re-reads that log.
* **Batch** (:class:`~falkirk.graph.FullHistory`): ``batch`` re-computes the table of
  total bytes per vertex every ``batch_every`` epochs (the vertices whose total changed
  since the last run), from its input history, which it logs; a failure re-runs it
  over that history. Its results are never fresh, and need not be.
* **Lazy checkpoint** (:class:`~falkirk.graph.LazyCheckpoint`): the connected
  components of the link graph, kept up to date by label propagation in an
  ``iterate`` loop (:mod:`falkirk.demo.components`), checkpointed every
  ``lazy_every`` epochs; a failure re-executes the epochs since, and what depends on
  them. The components' lookup table is checkpointed the same way; the batch table's
  lookup eagerly, with its answers logged, so a failure of the components never
  re-runs the batch.
* **Eager** (sequence numbers, :mod:`falkirk.graph.sequences`): each answered query,
  in ``qid`` order, updates the count of queries asked about its vertex; every update
  is committed, ``chunk`` queries at a time, before the response leaves.

Each query is answered with the batch table and the components as of the end of its
epoch (``lookup``): ``qid, vertex, bytes, component, asked`` (``bytes`` null before
the vertex's first batch run, ``component`` null for a vertex no link has named).
The statistics table holds ``seq, qid, vertex, asked``: ``seq`` is the query's
sequence number (epoch e's k-th query in qid order is ``(e - 1) * SEQ_BLOCK + k``).
Invalid lines of either input go to the dead-letter table with their ``source``,
``raw`` text and ``reason``.

:func:`falkirk.testing.figure1.expected` computes all three outputs in plain Python;
:func:`explain` says, from a storage root's committed metadata, what a failure in each
regime rolls back.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from falkirk.demo.components import (
    NONE,
    check,
    components_loop,
    lines,
    undirected,
)
from falkirk.demo.moved import forward
from falkirk.graph import EagerCheckpoint, FullHistory, LazyCheckpoint, LogOutputs, Pipeline
from falkirk.io import FileSource, ParquetTableSink

LINKS_HEADER = "src,dst,bytes"
QUERIES_HEADER = "qid,vertex"
#: The most bytes one link record may carry (totals stay far inside 64 bits).
MAX_BYTES = 10**12
RESPONSE_COLUMNS = ("qid", "vertex", "bytes", "component", "asked")
STATS_COLUMNS = ("seq", "qid", "vertex", "asked")
REJECTED_COLUMNS = ("source", "raw", "reason")
ANSWERED = "qid long, vertex long, bytes long, component long, asked long, seq long"

#: The processors whose failure stands for each regime in :func:`explain` (``*``:
#: every processor, as when the driver dies).
REGIMES = {
    "ephemeral": "check_links",
    "batch": "batch",
    "lazy checkpoint": "propagate",
    "eager (sequence numbers)": "asked",
    "whole application (the driver dies)": "*",
}


# -- the regimes' steps -----------------------------------------------------------------


def check_links(df: DataFrame) -> DataFrame:
    """Three non-negative integers, ``bytes`` at most :data:`MAX_BYTES`."""
    checked = check(df, ("src", "dst", "bytes"))
    too_many = F.when(F.col("bytes").try_cast("long") > MAX_BYTES, F.lit(f"bytes is above {MAX_BYTES}"))
    return checked.withColumn("reason", F.coalesce("reason", too_many))


def traffic(df: DataFrame, epoch: int) -> DataFrame:
    """A data reduction: the epoch's bytes per vertex (a link counts at both ends, a
    self-loop once), with the epoch."""
    s, d = F.col("src").cast("long"), F.col("dst").cast("long")
    ends = F.when(s == d, F.array(s)).otherwise(F.array(s, d))
    per_end = df.select(F.explode(ends).alias("vertex"), F.col("bytes").cast("long").alias("bytes"))
    return per_end.groupBy("vertex").agg(F.sum("bytes").alias("bytes")).withColumn("epoch", F.lit(epoch).cast("long"))


def batch_rows(every: int, key: object, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """``batch`` for a vertex with new bytes: its total grows; on a batch epoch the new
    total is emitted, otherwise it waits for the next one."""
    vertex = int(key[0] if isinstance(key, tuple) else key)  # type: ignore[arg-type]
    total = (int(state["total"].iloc[0]) if len(state) else 0) + int(rows["bytes"].sum())
    epoch = int(rows["epoch"].iloc[0])
    due = epoch % every == 0
    out = pd.DataFrame({"vertex": [vertex], "bytes": [total]}) if due else None
    return out, pd.DataFrame({"total": [total], "dirty": [not due]})


def batch_end(every: int, key: object, state: pd.DataFrame, epoch: int) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """``batch`` at the end of an epoch for a vertex without new bytes: on a batch
    epoch, a total that changed since the last run is emitted."""
    if epoch % every != 0 or not bool(state["dirty"].iloc[0]):
        return None, state
    vertex = int(key[0] if isinstance(key, tuple) else key)  # type: ignore[arg-type]
    return pd.DataFrame({"vertex": [vertex], "bytes": [int(state["total"].iloc[0])]}), state.assign(dirty=False)


def asked(key: object, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``asked`` for one vertex: its queries in sequence order, each with the number of
    queries about the vertex so far (itself included)."""
    rows = rows.sort_values("_seq")
    before = int(state["asked"].iloc[0]) if len(state) else 0
    counts = before + pd.RangeIndex(1, len(rows) + 1).to_numpy()
    out = rows[["qid", "vertex", "bytes", "component"]].assign(asked=counts, seq=rows["_seq"].to_numpy())
    return out, pd.DataFrame({"asked": [int(counts[-1])]})


def _unknown_as_null(column: str) -> Column:
    return F.when(F.col(column) == NONE, F.lit(None).cast("long")).otherwise(F.col(column)).alias(column)


# -- the dataflow ------------------------------------------------------------------------


def build_pipeline(
    links_dir: str,
    queries_dir: str,
    responses_dir: str,
    stats_dir: str,
    rejected_dir: str,
    *,
    batch_every: int = 3,
    lazy_every: int = 2,
    chunk: int = 50,
) -> Pipeline:
    """The dataflow of the module docstring."""
    p = Pipeline("figure1")
    text = {"wholetext": "true"}
    # Ephemeral: parse, validate, reduce.
    links = p.source("links", FileSource(links_dir, "text", "value string", options=text))
    valid_links, bad_links = links.map("link_lines", partial(lines, header=LINKS_HEADER)).validate("check_links", check_links)
    queries = p.source("queries", FileSource(queries_dir, "text", "value string", options=text))
    valid_queries, bad_queries = queries.map("query_lines", partial(lines, header=QUERIES_HEADER)).validate(
        "check_queries", partial(check, names=("qid", "vertex"))
    )
    p.union(
        "rejected",
        bad_links.map("link_rejects", lambda df: df.select(F.lit("links").alias("source"), "raw", "reason")),
        bad_queries.map("query_rejects", lambda df: df.select(F.lit("queries").alias("source"), "raw", "reason")),
    ).sink("dead_letter", ParquetTableSink(rejected_dir, epoch_column=None))
    # Batch: the table of total bytes per vertex, re-computed every batch_every epochs.
    # The reductions leave the ephemeral regime logged: a failure beyond them re-reads
    # the log, never the sources (the paper's clients are acknowledged once their
    # records have passed the ephemeral part).
    logged = LogOutputs()
    table = valid_links.map("traffic", traffic, policy=logged).stateful(
        "batch",
        "vertex",
        partial(batch_rows, batch_every),
        on_epoch_end=partial(batch_end, batch_every),
        state_schema="total long, dirty boolean",
        output_schema="vertex long, bytes long",
        policy=FullHistory(),
    )
    # Lazy checkpoint: connected components, incrementally, in a loop.
    lazy = LazyCheckpoint(every=lazy_every, compact_every=4)
    changes = components_loop(p, valid_links.map("undirected", undirected, policy=logged), lazy)
    components = changes.map("components", lambda df: df.groupBy("vertex").agg(F.min("component").alias("component")))
    # The queries, joined with both tables as of the end of their epoch.
    answered = (
        valid_queries.map("query", lambda df: df.select(F.col("qid").cast("long"), F.col("vertex").cast("long")), policy=logged)
        .lookup("with_traffic", table, "vertex", policy=EagerCheckpoint(compact_every=10))
        .lookup("with_component", components, "vertex", policy=lazy)
    )
    # Eager: per-query statistics, each committed before its response leaves.
    stats = p.sequenced("stats", chunk=chunk)
    in_order = answered.map(
        "in_order",
        lambda df: df.select("qid", "vertex", *[F.coalesce(c, F.lit(NONE).cast("long")).alias(c) for c in ("bytes", "component")]).orderBy(
            "qid", "vertex", "bytes", "component"
        ),
    )
    counted = stats.enter("number", in_order).stateful(
        "asked", "vertex", asked, state_schema="asked long", output_schema=ANSWERED, policy=EagerCheckpoint(compact_every=10)
    )
    out = stats.leave("regroup", counted)
    out.map("stats_rows", lambda df: df.select(*STATS_COLUMNS)).sink("stats", ParquetTableSink(stats_dir))
    out.map(
        "responses_rows", lambda df: df.select("qid", "vertex", _unknown_as_null("bytes"), _unknown_as_null("component"), "asked")
    ).sink("responses", ParquetTableSink(responses_dir))
    return p

# -- what a failure in each regime rolls back ---------------------------------------------------


def explain(pipeline: Pipeline, storage: str | Path) -> dict[str, list[str]]:
    """What a failure of one processor of each regime (:data:`REGIMES`) would roll back,
    now, given what ``storage`` (a local root, not in use) has committed: the solver's
    plan (:func:`falkirk.ops.what_if.what_if`) with that processor failed and every
    other one surviving with its live state, as after an executor loss (for the whole
    application: every processor failed, as after a restart). Per regime, one line
    per processor that rolls back: where to, the epochs it re-does, how its state
    comes back, and the solver's reason; then the logs that are re-sent."""
    from falkirk.ops.what_if import what_if

    procs = pipeline.processors
    out: dict[str, list[str]] = {}
    for regime, failed in REGIMES.items():
        answer = what_if(pipeline, storage, set(procs) if failed == "*" else {failed})
        epoch, plan = answer.epoch, answer.plan
        said = [f"{'every processor' if failed == '*' else failed} fails after epoch {epoch}:"]
        for name in procs:
            f = plan.frontiers[name]
            if f.is_top:
                continue
            said.append(
                f"  {name} ({_restores(procs[name])}) rolls back to {f!r}, re-doing {answer.redo[name]} epoch(s): {plan.explanations[name]}"
            )
        said += [f"  {edge} re-sends its log of {list(times)}" for edge, times in plan.resend.items() if times]
        kept_live = sorted(n for n in procs if plan.frontiers[n].is_top)
        said.append(f"  keep their live state: {', '.join(kept_live) or 'none'}")
        out[regime] = said
    return out


def _restores(p: object) -> str:
    """How a processor's state comes back after a rollback, in words."""
    policy = p.policy  # type: ignore[attr-defined]
    if not p.spec.keyed:  # type: ignore[attr-defined]
        return "no state; re-runs" + (", re-sends its log" if policy.logs_outputs else "")
    known = {
        "FullHistory": "replays its whole input history",
        "LazyCheckpoint": "restores a lazy checkpoint and re-runs the epochs after it",
        "EagerCheckpoint": "restores its last eager checkpoint",
    }
    return known.get(type(policy).__name__, str(policy.name))


#: What moved to :mod:`falkirk.testing.figure1` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['Expected', 'expected', 'write_input'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.figure1", _MOVED)
