"""The Flux paper's clickstream query (section 2.4) as a Falkirk pipeline.

Click events ``sess_id,user_id,ts,event`` arrive as CSV files. Rows are validated
(bad ones go to a dead-letter table with a reason); sessions are assembled per
``sess_id`` (a ``start``, any ``click`` events and an ``end``; duration = end.ts -
start.ts; a session may span many epochs); completed sessions are exchanged by
``user_id`` and each user keeps the running count of ended sessions, their maximum
and their average duration.

Policies (a mix that shows the solver at work, and what each costs):

* ``validate`` and ``by_user`` (the exchange): stateless, re-executed after a crash;
* ``sessions``: eager checkpoints - its state (open sessions) is small, and logging its
  output lets the per-user aggregate lag behind without dragging it back;
* ``user_stats``: lazy checkpoints every 5 epochs - the larger state is written
  rarely; after a crash it restores its checkpoint and is re-fed the logged
  sessions of the epochs after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import (
    EagerCheckpoint,
    GlobalCheckpoints,
    GraphError,
    LazyCheckpoint,
    Pipeline,
    Policy,
    Source,
)
from falkirk.io import FileSource, ParquetTableSink

RAW_SCHEMA = "sess_id string, user_id string, ts string, event string, _raw string"
CSV_OPTIONS = {"header": "true", "mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_raw"}
EVENTS = ("start", "click", "end")
OUTPUT_COLUMNS = ["user_id", "sessions", "max_duration", "avg_duration", "epoch"]


def check_rows(df: DataFrame) -> DataFrame:
    """Add ``reason``: null for a valid row, else why it is rejected."""
    reason = (
        F.when(F.col("_raw").isNotNull(), F.lit("malformed row: expected 4 fields sess_id,user_id,ts,event"))
        .when(_blank("sess_id"), F.lit("empty sess_id"))
        .when(_blank("user_id"), F.lit("empty user_id"))
        .when(~F.coalesce(F.trim(F.col("ts")).rlike(r"^[+-]?[0-9]{1,18}$"), F.lit(False)), F.lit("ts is not an integer"))
        .when(~F.coalesce(F.col("event").isin(*EVENTS), F.lit(False)), F.lit("event must be start, click or end"))
    )
    return df.withColumn("reason", reason)


def _blank(column: str) -> Column:
    return F.col(column).isNull() | (F.trim(F.col(column)) == "")


def parse(df: DataFrame, *, keep: Sequence[str] = ()) -> DataFrame:
    """Typed rows of valid input (``keep``: columns passed through first)."""
    return df.select(*keep, "sess_id", "user_id", F.trim(F.col("ts")).try_cast("long").alias("ts"), "event")


def rejected_rows(df: DataFrame) -> DataFrame:
    return df.select("sess_id", "user_id", "ts", "event", F.col("_raw").alias("raw"), "reason")


SESSION_STATE = "user_id string, start_ts long, end_ts long"
SESSION_OUTPUT = "user_id string, duration double"


def sessionize(sess_id: str, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One session's new events + its stored state -> (ended session, new state)."""
    prev = state.iloc[0] if len(state) else None
    starts = rows.loc[rows["event"] == "start"]
    ends = rows.loc[rows["event"] == "end", "ts"]
    start_ts = prev["start_ts"] if prev is not None and pd.notna(prev["start_ts"]) else None
    end_ts = prev["end_ts"] if prev is not None and pd.notna(prev["end_ts"]) else None
    user = prev["user_id"] if prev is not None else None
    if len(starts):
        first = starts.sort_values("ts").iloc[0]
        if start_ts is None or first["ts"] < start_ts:
            start_ts, user = int(first["ts"]), first["user_id"]
    if user is None:
        user = rows["user_id"].iloc[0]
    if len(ends):
        end_ts = int(ends.max()) if end_ts is None else max(int(end_ts), int(ends.max()))
    if start_ts is not None and end_ts is not None:
        return pd.DataFrame({"user_id": [user], "duration": [float(end_ts - start_ts)]}), None
    return pd.DataFrame(columns=["user_id", "duration"]), pd.DataFrame(
        {"user_id": [user], "start_ts": pd.array([start_ts], dtype="Int64"), "end_ts": pd.array([end_ts], dtype="Int64")}
    )


def sessionize_all(rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`sessionize` for many sessions at once (``stateful(vectorized=True)``):
    the same rules, as pandas group-bys instead of one Python call per session."""
    ids = pd.Index(pd.unique(pd.concat([rows["sess_id"], state["sess_id"]], ignore_index=True)), name="sess_id")
    stored = state.set_index("sess_id").reindex(ids)
    starts = rows.loc[rows["event"] == "start"].sort_values("ts", kind="stable").drop_duplicates("sess_id").set_index("sess_id")
    new_start = starts["ts"].reindex(ids).astype("Float64")
    start = stored["start_ts"].astype("Float64")
    take = new_start.notna() & (start.isna() | (new_start < start)).fillna(True)
    start = start.where(~take, new_start)
    user = stored["user_id"].astype(object).where(~take, starts["user_id"].reindex(ids))
    first_user = rows.drop_duplicates("sess_id").set_index("sess_id")["user_id"].reindex(ids)
    user = user.where(user.notna(), first_user)
    ends = rows.loc[rows["event"] == "end"].groupby("sess_id")["ts"].max().reindex(ids).astype("Float64")
    end = pd.concat([stored["end_ts"].astype("Float64"), ends], axis=1).max(axis=1, skipna=True)
    done = (start.notna() & end.notna()).to_numpy(dtype=bool)
    outputs = pd.DataFrame({"user_id": user[done].to_numpy(), "duration": (end[done] - start[done]).astype(float).to_numpy()})
    open_ = ~done
    new_state = pd.DataFrame(
        {
            "sess_id": ids[open_],
            "user_id": user[open_].to_numpy(),
            "start_ts": start[open_].astype("Int64").to_numpy(),
            "end_ts": end[open_].astype("Int64").to_numpy(),
        }
    )
    return outputs, new_state


def build_pipeline(
    input_dir: str,
    output_dir: str,
    rejected_dir: str,
    *,
    files_per_epoch: int = 1,
    sessions_policy: Policy | None = None,
    stats_policy: Policy | None = None,
    source: Source | None = None,
    vectorized: bool = False,
    checkpoints: GlobalCheckpoints | None = None,
) -> Pipeline:
    """The query reading CSV files of ``input_dir`` (or ``source``, any source with
    the columns of :data:`RAW_SCHEMA`, such as the clickstream generator).
    ``vectorized`` sessionizes with :func:`sessionize_all` instead of the per-session
    :func:`sessionize` (same results, far fewer Python calls)."""
    p = Pipeline("clickstream", checkpoints=checkpoints)
    if checkpoints is not None and (sessions_policy or stats_policy):
        raise GraphError("build_pipeline: give per-processor policies or global checkpoints, not both")
    if checkpoints is None:  # per-processor policies, and why: see the module docstring
        sessions_policy, stats_policy = sessions_policy or EagerCheckpoint(), stats_policy or LazyCheckpoint(every=5)
    raw = p.source("events", source or FileSource(input_dir, "csv", RAW_SCHEMA, files_per_epoch, CSV_OPTIONS))
    valid, rejected = raw.validate("validate", check_rows)
    rejected.map("rejected_fields", rejected_rows).sink("dead_letter", ParquetTableSink(rejected_dir, epoch_column=None))
    (
        valid.map("parse", parse)
        .stateful(
            "sessions",
            "sess_id",
            sessionize_all if vectorized else sessionize,
            state_schema=SESSION_STATE,
            output_schema=SESSION_OUTPUT,
            policy=sessions_policy,
            vectorized=vectorized,
        )
        .exchange("by_user", "user_id")
        .aggregate(
            "user_stats",
            "user_id",
            {
                "sessions": ("count", None),
                "max_duration": ("max", "duration"),
                "avg_duration": ("avg", "duration"),
            },
            policy=stats_policy,
        )
        .sink("output", ParquetTableSink(output_dir))
    )
    return p


#: What moved to :mod:`falkirk.testing.clickstream` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['batch_output', 'batch_rejected', 'expected_rejections', 'input_by_epoch', 'write_input'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.clickstream", _MOVED)
