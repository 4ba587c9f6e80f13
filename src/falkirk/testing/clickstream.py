"""The clickstream demo's references and input generator (:mod:`falkirk.demo.clickstream`
holds the pipeline).

:func:`batch_output` and :func:`batch_rejected` compute the whole output and
dead-letter table the query must produce, by one plain Spark batch job over all the
input (they share only the pipeline's row validation and parsing, the contract of
the input); :func:`expected_rejections` counts the invalid rows in plain Python,
independent of Spark and of the pipeline; :func:`write_input` generates input.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from falkirk.demo.clickstream import (
    CSV_OPTIONS,
    EVENTS,
    RAW_SCHEMA,
    check_rows,
    parse,
    rejected_rows,
)


def input_by_epoch(spark: SparkSession, input_dir: str, files_per_epoch: int = 1) -> DataFrame:
    """Every input row with the epoch that reads it (column ``epoch``): the files of
    ``input_dir`` in name order, ``files_per_epoch`` per epoch, names starting with
    ``.`` or ``_`` ignored - the cut :class:`~falkirk.io.FileSource` makes."""
    names = sorted(p.name for p in Path(input_dir).iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    frames = [
        spark.read.schema(RAW_SCHEMA)
        .options(**CSV_OPTIONS)
        .option("__globPaths__", "false")  # names are literal, as FileSource reads them
        .csv(str(Path(input_dir) / name))
        .withColumn("epoch", F.lit(i // files_per_epoch + 1).cast("long"))
        for i, name in enumerate(names)
    ]
    if not frames:
        return spark.createDataFrame([], f"{RAW_SCHEMA}, epoch long")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def batch_output(spark: SparkSession, input_dir: str, files_per_epoch: int = 1) -> pd.DataFrame:
    """The whole output the streaming query must produce, computed by one plain Spark
    batch job over all the input (the reference crash tests compare with): for every
    user and every epoch in which one of the user's sessions ended, the user's stats
    over all sessions ended so far. A session ends in the epoch in which both its
    start and its end have arrived; its duration is its earliest start's ts to its
    latest end's ts among the events that arrived by then. Columns and types as the
    OUT table: ``user_id, sessions, max_duration, avg_duration, epoch``."""
    raw = input_by_epoch(spark, input_dir, files_per_epoch)
    valid = parse(check_rows(raw).filter(F.col("reason").isNull()), keep=["epoch"])
    event = F.col("event")
    first_start = valid.filter(event == "start").groupBy("sess_id").agg(F.min("epoch").alias("s"))
    first_end = valid.filter(event == "end").groupBy("sess_id").agg(F.min("epoch").alias("e"))
    ended = first_start.join(first_end, "sess_id").select("sess_id", F.greatest("s", "e").alias("ended"))
    seen = valid.join(ended, "sess_id").filter(F.col("epoch") <= F.col("ended"))
    starts = seen.filter(event == "start").groupBy("sess_id", "ended").agg(
        F.min_by("user_id", "ts").alias("user_id"), F.min("ts").alias("start_ts")
    )
    ends = seen.filter(event == "end").groupBy("sess_id").agg(F.max("ts").alias("end_ts"))
    sessions = starts.join(ends, "sess_id").select(
        "user_id", F.col("ended").alias("epoch"), (F.col("end_ts") - F.col("start_ts")).cast("double").alias("d")
    )
    per_epoch = sessions.groupBy("user_id", "epoch").agg(
        F.count(F.lit(1)).alias("n"), F.sum("d").alias("total"), F.max("d").alias("longest")
    )
    so_far = Window.partitionBy("user_id").orderBy("epoch").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    stats = per_epoch.select(
        "user_id",
        F.sum("n").over(so_far).cast("long").alias("sessions"),
        F.max("longest").over(so_far).alias("max_duration"),
        (F.sum("total").over(so_far) / F.sum("n").over(so_far)).alias("avg_duration"),
        F.col("epoch").cast("long").alias("epoch"),
    )
    result: pd.DataFrame = stats.toPandas()
    return result.sort_values(["user_id", "epoch"]).reset_index(drop=True)


def batch_rejected(spark: SparkSession, input_dir: str) -> pd.DataFrame:
    """Every row the query must reject, as the REJ table holds it (one plain Spark
    batch job over all the input)."""
    raw = input_by_epoch(spark, input_dir).drop("epoch")
    result: pd.DataFrame = rejected_rows(check_rows(raw).filter(F.col("reason").isNotNull())).toPandas()
    return result


def write_input(
    directory: str | Path,
    *,
    files: int,
    sessions_per_file: int,
    users: int,
    seed: int,
    bad_fraction: float = 0.02,
) -> int:
    """Generate clickstream CSV files (sessions may span files; some rows malformed).
    Returns the number of rows written."""
    rng = random.Random(seed)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pending: list[list[str]] = [[] for _ in range(files + 3)]
    ts = 0
    for f in range(files):
        for s in range(sessions_per_file):
            sess, user = f"s{f}_{s}", f"u{rng.randrange(users)}"
            span = rng.choice([0, 0, 0, 1, 2])  # files the session spans
            clicks = rng.randrange(0, 4)
            ts_start = ts + rng.randrange(1, 5)
            ts = ts_start
            events = [(f, f"{sess},{user},{ts_start},start")]
            for c in range(clicks):
                events.append((f + rng.randint(0, span), f"{sess},{user},{ts_start + c + 1},click"))
            end_file = f + span
            events.append((end_file, f"{sess},{user},{ts_start + clicks + rng.randrange(1, 50)},end"))
            for target, line in events:
                pending[min(target, files - 1)].append(line)
    bad_lines = ["a,b,c", "s,u,notanumber,click", ",u1,5,start", "s9,,5,end", "s8,u1,5,jump", "x,y,1,start,extra"]
    count = 0
    for f in range(files):
        lines = pending[f]
        rng.shuffle(lines)
        for _ in range(int(len(lines) * bad_fraction)):
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(bad_lines))
        (directory / f"clicks-{f:05d}.csv").write_text("sess_id,user_id,ts,event\n" + "\n".join(lines) + "\n")
        count += len(lines)
    return count


def expected_rejections(input_dir: str) -> int:
    """Rows a correct run must reject: a plain-Python count, independent of Spark and
    of :func:`~falkirk.demo.clickstream.check_rows` (a cross-check of :func:`batch_rejected`)."""
    n = 0
    for path in sorted(Path(input_dir).iterdir()):
        if path.name.startswith((".", "_")):
            continue
        for line in path.read_text().splitlines()[1:]:
            n += _bad(line)
    return n


def _bad(line: str) -> int:
    fields = line.split(",")
    if len(fields) != 4:
        return 1
    sess, user, ts, event = (x.strip() for x in fields)
    if not sess or not user or event not in EVENTS:
        return 1
    try:
        int(ts)
    except ValueError:
        return 1
    return 0
