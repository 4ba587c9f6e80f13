"""Windowed word counts over event time (``examples/windowed_counts.py``).

CSV files with header ``ts,word`` (``ts``: an integer event time in seconds; ``word``:
a non-empty string) are read in name order, one file per epoch. Rows that are not
like that are dropped and counted. Per word and event-time window the pipeline
counts the rows, and writes each window once, when the watermark (the greatest
``ts`` seen minus the delay) closes it: ``window_start, window_end, word, count``.

The dataflow and its policies::

    lines (FileSource) ── words ── counts (window; cec | lazy | eager) ── rows ── output (Parquet)

* ``words``, ``rows``: stateless (``words`` blanks invalid rows, which ``counts``
  counts and drops);
* ``counts``: :class:`~falkirk.graph.ContinuousEventualCheckpoint` by default (its
  log holds the windows' footprints; it keeps its own input from the oldest one
  on), or lazy / eager checkpoints of its state.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import (
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    GraphError,
    LazyCheckpoint,
    Pipeline,
    Policy,
    Session,
    Sliding,
    Tumbling,
    WindowShape,
)
from falkirk.io import FileSource, ParquetTableSink

RAW_SCHEMA = "ts string, word string, _raw string"
CSV_OPTIONS = {"header": "true", "mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_raw"}
OUTPUT_COLUMNS = ["window_start", "window_end", "word", "count"]
#: Recovery of the CEC policy replays at most about this many input rows.
CEC_REPLAY_TARGET = 20_000


def policy_named(name: str, replay_target: int | None = CEC_REPLAY_TARGET, extent_target: int | None = None) -> Policy:
    """The window's policy for ``--policy`` (the targets are CEC's U and Q)."""
    policies: dict[str, Policy] = {
        "cec": ContinuousEventualCheckpoint(replay_target=replay_target, extent_target=extent_target),
        "lazy": LazyCheckpoint(every=5),
        "eager": EagerCheckpoint(),
    }
    if name not in policies:
        raise GraphError(f"unknown policy {name!r}; use one of {sorted(policies)}")
    return policies[name]


def shape_of(window: int | None, slide: int | None, session_gap: int | None) -> WindowShape:
    """The window shape of the command-line options."""
    if (window is None) == (session_gap is None):
        raise GraphError("give exactly one of --window SECONDS [--slide SECONDS] and --session-gap SECONDS")
    if session_gap is not None:
        if slide is not None:
            raise GraphError("--slide goes with --window, not with --session-gap")
        return Session(session_gap)
    assert window is not None
    return Tumbling(window) if slide is None or slide == window else Sliding(window, slide)


def _reason() -> Column:
    ts = F.trim(F.col("ts"))
    return (
        F.when(F.col("_raw").isNotNull(), F.lit("malformed row: expected 2 fields ts,word"))
        .when(~F.coalesce(ts.rlike(r"^[+-]?[0-9]{1,18}$"), F.lit(False)), F.lit("ts is not an integer"))
        .when(F.col("word").isNull() | (F.col("word") == ""), F.lit("empty word"))
    )


def words(df: DataFrame) -> DataFrame:
    """``ts`` (long) and ``word``; both null in an invalid row, which the window
    operator then counts and drops (no event time)."""
    ok = _reason().isNull()
    return df.select(F.when(ok, F.trim(F.col("ts")).try_cast("long")).alias("ts"), F.when(ok, F.col("word")).alias("word"))


def build_pipeline(input_dir: str, output_dir: str, shape: WindowShape, watermark_delay: int, policy: Policy) -> Pipeline:
    p = Pipeline("windowed_counts")
    lines = p.source("lines", FileSource(input_dir, "csv", RAW_SCHEMA, 1, CSV_OPTIONS))
    counts = lines.map("words", words).window(
        "counts", "word", "ts", shape, {"count": ("count", None)}, watermark_delay=watermark_delay, policy=policy
    )
    counts.map("rows", lambda df: df.select(*OUTPUT_COLUMNS)).sink("output", ParquetTableSink(output_dir, epoch_column=None))
    return p


#: What moved to :mod:`falkirk.testing.windowed` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['BAD_LINES', 'expected', 'read_input', 'write_input'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.windowed", _MOVED)
