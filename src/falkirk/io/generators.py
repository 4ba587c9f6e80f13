"""Seeded, deterministic generator sources (demos and benchmarks).

A :class:`GeneratorSource` produces batch ``b`` of its input as a Spark DataFrame
computed from ``b`` and a seed alone (``spark.range`` plus hash functions, in the
executors): nothing is read, nothing is held in the driver, and a replay after a
crash regenerates exactly the same rows. Its offsets are ``{"batch": b}``, one batch
per epoch, ``batches`` in all.

Two generators are provided:

* :func:`clickstream_generator` - click events ``sess_id,user_id,ts,event`` of the
  Flux paper's query, in the same columns as the CSV source of the clickstream
  example (sessions span up to three batches; a fraction of rows is malformed);
* :func:`keyed_generator` - ``key, value`` rows over a fixed key space, for keyed
  aggregates.

:meth:`GeneratorSource.write_files` writes the same batches as files, so that other
systems (Spark Structured Streaming, a batch job) can read identical input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from falkirk.graph.exceptions import GraphError
from falkirk.storage.filesystem import filesystem_for

BATCH_PREFIX = "batch-"


@dataclass(frozen=True)
class GeneratorSource:
    """``batches`` batches of ``generate(spark, batch)`` (which must depend on its
    arguments only), with columns ``schema`` (a DDL string). ``rows_per_batch`` is
    what progress displays report (exact or an estimate, see the factory)."""

    schema: str
    batches: int
    generate: Callable[[SparkSession, int], DataFrame]
    rows_per_batch: int

    def __post_init__(self) -> None:
        if self.batches < 1:
            raise GraphError(f"GeneratorSource: batches must be >= 1, got {self.batches}")

    @staticmethod
    def name(batch: int) -> str:
        return f"{BATCH_PREFIX}{batch:08d}"

    def struct(self, spark: SparkSession) -> StructType:
        return spark.createDataFrame([], self.schema).schema

    def next_offsets(self, previous: dict[str, Any] | None) -> dict[str, Any] | None:
        """The batch after ``previous``'s (batch 0 first), or None after the last one."""
        batch = 0 if previous is None else int(previous["batch"]) + 1
        return {"batch": batch} if batch < self.batches else None

    def count_records(self, offsets: dict[str, Any]) -> int:
        """The records of these offsets (no read: for progress displays)."""
        return self.rows_per_batch

    def read(self, spark: SparkSession, offsets: dict[str, Any]) -> DataFrame:
        return self.batch(spark, int(offsets["batch"]))

    def check(self, offsets: dict[str, Any]) -> None:
        """Nothing can change: a batch is a function of its number and the seed."""

    def batch(self, spark: SparkSession, batch: int) -> DataFrame:
        """The rows of batch ``batch`` (a function of the batch number and the seed)."""
        if not 0 <= batch < self.batches:
            raise GraphError(f"GeneratorSource: batch {batch} is not one of its {self.batches} batches")
        return self.generate(spark, batch).select(*self.struct(spark).fieldNames())

    def write_files(
        self, spark: SparkSession, directory: str, *, format: str = "parquet", header: bool = True
    ) -> list[str]:
        """Write every batch as one file ``batch-<n>.<format>`` (``parquet`` or ``csv``,
        with a header line unless ``header`` is false) in ``directory``, in batch
        order; returns the file paths. CSV rows that carry a ``_raw`` line (malformed
        input) are written as that line."""
        if format not in ("parquet", "csv"):
            raise GraphError(f"write_files: format must be parquet or csv, got {format!r}")
        fs, root = filesystem_for(directory, spark)
        fs.mkdirs(root)
        written = []
        for batch in range(self.batches):
            df = self.batch(spark, batch)
            staging = fs.join(root, f"_staging-{batch}")
            fs.delete(staging)
            if format == "parquet":
                df.coalesce(1).write.parquet(staging)
            else:
                _csv_lines(df, header).coalesce(1).write.text(staging)
            part = next(p for p, d in fs.children(staging) if not d and p.rsplit("/", 1)[-1].startswith("part-"))
            final = fs.join(root, f"{self.name(batch)}.{format}")
            fs.replace(part, final)
            fs.delete(staging)
            written.append(final)
        return written


def _csv_lines(df: DataFrame, header: bool) -> DataFrame:
    """One text line per row (plain comma-joined fields), after a header line."""
    data = [c for c in df.columns if c != "_raw"]
    joined = F.concat_ws(",", *[F.coalesce(F.col(c).cast("string"), F.lit("")) for c in data])
    line = F.coalesce(F.col("_raw"), joined) if "_raw" in df.columns else joined
    lines = df.select(line.alias("value"))
    if not header:
        return lines
    first = df.sparkSession.createDataFrame([(",".join(data),)], "value string")
    # union keeps partition order, and coalesce(1) concatenates partitions in order
    return first.union(lines)


def _hash(seed: int, *parts: Column | str) -> Column:
    """A non-negative deterministic 63-bit hash of ``parts`` (columns or salts)."""
    cols = [F.lit(p) if isinstance(p, str) else p for p in parts]
    return F.xxhash64(F.lit(seed), *cols).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF))


CLICK_SCHEMA = "sess_id string, user_id string, ts string, event string, _raw string"
_BAD_ROWS = [  # (sess_id, user_id, ts, event, _raw) as the CSV reader would produce them
    ("a", "b", "c", None, "a,b,c"),
    ("s", "u", "notanumber", "click", None),
    (None, "u1", "5", "start", None),
    ("s9", None, "5", "end", None),
    ("s8", "u1", "5", "jump", None),
    ("x", "y", "1", "start", "x,y,1,start,extra"),
]


def clickstream_generator(
    *, batches: int, sessions_per_batch: int, users: int, seed: int = 0, bad_fraction: float = 0.02
) -> GeneratorSource:
    """Click sessions: batch ``b`` holds the events that fall in it of the sessions
    started in batches ``b-2..b``. Each session has a ``start``, 0-3 ``click``s and an
    ``end`` (duration 1-52 ticks after its last click); a session spans 1-3 batches
    (60% within one). About ``bad_fraction`` of rows are malformed, one of six kinds.
    ``rows_per_batch`` is the steady-state average (3.5 events per session, plus the
    malformed rows), an estimate for progress displays."""

    def generate(spark: SparkSession, batch: int) -> DataFrame:
        first = max(0, batch - 2) * sessions_per_batch
        g = F.col("id")
        sessions = spark.range(first, (batch + 1) * sessions_per_batch).select(
            g.alias("g"),
            F.floor(g / sessions_per_batch).alias("b0"),
            F.element_at(F.array(*[F.lit(x) for x in (0, 0, 0, 1, 2)]), (_hash(seed, g, "span") % 5 + 1).cast("int")).alias("span"),
            (_hash(seed, g, "clicks") % 4).alias("clicks"),
            F.concat(F.lit("u"), (_hash(seed, g, "user") % users).cast("string")).alias("user_id"),
            (g * 64 + 1).alias("ts0"),
            (_hash(seed, g, "duration") % 49 + 1).alias("tail"),
        )
        slot = F.col("slot")
        click_batch = F.col("b0") + _hash(seed, F.col("g"), slot) % (F.col("span") + 1)
        events = (
            sessions.withColumn("slot", F.explode(F.sequence(F.lit(0), F.lit(4))))
            .filter((slot == 0) | (slot == 4) | (slot <= F.col("clicks")))
            .select(
                F.concat(F.lit("s"), F.col("g").cast("string")).alias("sess_id"),
                "user_id",
                F.when(slot == 0, F.col("ts0"))
                .when(slot == 4, F.col("ts0") + F.col("clicks") + F.col("tail"))
                .otherwise(F.col("ts0") + slot)
                .cast("string")
                .alias("ts"),
                F.when(slot == 0, "start").when(slot == 4, "end").otherwise("click").alias("event"),
                F.lit(None).cast("string").alias("_raw"),
                F.when(slot == 0, F.col("b0"))
                .when(slot == 4, F.col("b0") + F.col("span"))
                .otherwise(click_batch)
                .alias("batch"),
            )
            .filter(F.col("batch") == batch)
            .drop("batch")
        )
        n_bad = int(sessions_per_batch * 3.5 * bad_fraction)
        if n_bad == 0:
            return events
        kinds = spark.createDataFrame(
            [(i, *row) for i, row in enumerate(_BAD_ROWS)], "kind long, sess_id string, user_id string, ts string, event string, _raw string"
        )
        bad = (
            spark.range(n_bad)
            .select((_hash(seed, F.col("id"), F.lit(batch).cast("string"), "bad") % len(_BAD_ROWS)).alias("kind"))
            .join(F.broadcast(kinds), "kind")
            .drop("kind")
        )
        return events.unionByName(bad)

    return GeneratorSource(CLICK_SCHEMA, batches, generate, rows_per_batch=int(sessions_per_batch * 3.5 * (1 + bad_fraction)))


KEYED_SCHEMA = "key long, value long"


def keyed_generator(*, batches: int, rows_per_batch: int, keys: int, seed: int = 0) -> GeneratorSource:
    """``rows_per_batch`` rows per batch, ``key`` uniform over ``0..keys-1`` and
    ``value`` uniform over ``0..999`` (exact row count)."""

    def generate(spark: SparkSession, batch: int) -> DataFrame:
        start = batch * rows_per_batch
        i = F.col("id")
        return spark.range(start, start + rows_per_batch).select(
            (_hash(seed, i, "key") % keys).alias("key"), (_hash(seed, i, "value") % 1000).alias("value")
        )

    return GeneratorSource(KEYED_SCHEMA, batches, generate, rows_per_batch=rows_per_batch)
