"""Rows set aside: their identities, the ``errors`` rows made of them, and what a run
knows of them (:mod:`falkirk.graph.errors` says what a user sees).

An identity is ``xxhash64`` of a row's columns (a row-wise processor) or of its key's
columns (a keyed processor): no repartitioning or re-read changes it, so a replay of
the epoch, in this run or after a crash, sets aside exactly the rows the first run
did. :class:`Quarantines` holds the committed records (read at start) and those found
in this run and not committed yet; :meth:`Quarantines.split` divides a processor's
input of an epoch into the rows it processes and its ``errors`` rows.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from falkirk.graph import Processor
from falkirk.graph.errors import ERROR_COLUMNS
from falkirk.spark.frames import has_map
from falkirk.storage import MetaStore, QuarantineRecord, QuarantineUnit

#: The hidden column holding an identity while rows are split.
IDENTITY = "_falkirk_identity"
REASON = "_falkirk_reason"


def errors_schema(input_schema: StructType) -> StructType:
    """An ``errors`` row: the input's columns, then ``processor``, ``epoch`` and
    ``reason`` (an input column of one of those names is renamed ``input_<name>``)."""
    fields = [
        StructField(f"input_{f.name}" if f.name in ERROR_COLUMNS else f.name, f.dataType, f.nullable) for f in input_schema.fields
    ]
    return StructType([*fields, StructField("processor", StringType(), False), StructField("epoch", LongType(), False), StructField("reason", StringType(), False)])


def unit_of(p: Processor) -> QuarantineUnit:
    """What ``p`` quarantines: keys for a keyed processor, rows otherwise."""
    return QuarantineUnit.KEY if p.spec.keyed else QuarantineUnit.ROW


def identity(df: DataFrame, p: Processor) -> Column:
    """The identity of each row of ``df``, ``p``'s input (see the module docstring):
    ``xxhash64`` of its columns (its key's, for a keyed processor) after a mask of
    which are null - the hash skips nulls, so ``(null, 'a')`` and ``('a', null)``
    would be one identity without it."""
    columns = list(getattr(p.spec, "key", ())) if p.spec.keyed else df.columns
    nulls = F.concat_ws("", *[F.when(F.col(c).isNull(), F.lit("1")).otherwise(F.lit("0")) for c in columns])
    if any(has_map(df.schema[c].dataType) for c in columns):  # xxhash64 takes no maps
        return F.xxhash64(nulls, F.to_json(F.struct(*[F.col(c) for c in columns])))
    return F.xxhash64(nulls, *[F.col(c) for c in columns])


def file_identity(name: str) -> int:
    """The identity of an input file a source left unread: its name's hash, as a
    signed 64-bit integer."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()[:8], "big", signed=True)



class Quarantines:
    """The quarantine records a run knows: committed ones, and those found in this run
    that the epoch's commit will record (see the module docstring)."""

    def __init__(self, committed: dict[tuple[str, int], QuarantineRecord]) -> None:
        self.committed = dict(committed)
        self.pending: dict[tuple[str, int], QuarantineRecord] = {}
        #: Searches per (processor, epoch) in this run (a third one means the rows do
        #: not stay out: see :meth:`searched`).
        self.searches: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    @classmethod
    def read(cls, store: MetaStore) -> Quarantines:
        return cls(store.quarantined())

    def get(self, processor: str, epoch: int) -> QuarantineRecord | None:
        """What ``processor`` sets aside in ``epoch`` (a pending record extends a committed one)."""
        with self._lock:
            return self.pending.get((processor, epoch)) or self.committed.get((processor, epoch))

    def is_committed(self, processor: str, epoch: int) -> bool:
        with self._lock:
            return (processor, epoch) in self.committed

    def pending_record(self, processor: str, epoch: int) -> QuarantineRecord | None:
        """The record found in this run that the epoch's commit is to record, if any."""
        with self._lock:
            return self.pending.get((processor, epoch))

    def searched(self, processor: str, epoch: int) -> int:
        """Count one more search of ``processor``'s rows of ``epoch``; returns how many so far."""
        with self._lock:
            self.searches[(processor, epoch)] = self.searches.get((processor, epoch), 0) + 1
            return self.searches[(processor, epoch)]

    def add(self, found: QuarantineRecord) -> QuarantineRecord:
        """Record rows found in this run; returns everything now set aside there."""
        key = (found.processor, found.epoch)
        with self._lock:
            known = self.pending.get(key) or self.committed.get(key)
            merged = known.merged(found) if known is not None else found
            self.pending[key] = merged
            return merged

    def committed_now(self, records: Sequence[QuarantineRecord]) -> None:
        """``records`` were committed (with their epoch)."""
        with self._lock:
            for r in records:
                self.pending.pop((r.processor, r.epoch), None)
                self.committed[(r.processor, r.epoch)] = r

    def files_read(self, source: str, epoch: int, offsets: dict[str, Any] | None) -> dict[str, Any] | None:
        """``source``'s offsets of ``epoch`` without the files it sets aside there."""
        record = self.get(source, epoch)
        if record is None or offsets is None or record.unit is not QuarantineUnit.FILE:
            return offsets
        return {**offsets, "files": [f for f in offsets.get("files", []) if file_identity(f[0]) not in record.reasons]}

    def split(self, spark: SparkSession, p: Processor, epoch: int, inputs: list[DataFrame]) -> tuple[list[DataFrame], DataFrame | None]:
        """``p``'s ``inputs`` of ``epoch`` without the rows it sets aside there, and those
        rows as ``errors`` rows (None: nothing is set aside)."""
        record = self.get(p.name, epoch)
        if record is None or not record.reasons or len(inputs) != 1:
            return inputs, None
        df = inputs[0]
        marked = df.withColumn(IDENTITY, identity(df, p))
        ids = list(record.reasons)
        good = marked.filter(~F.col(IDENTITY).isin(ids)).drop(IDENTITY)
        reasons = spark.createDataFrame(list(record.reasons.items()), f"{IDENTITY} long, {REASON} string")
        schema = errors_schema(df.schema)
        bad = marked.filter(F.col(IDENTITY).isin(ids)).join(F.broadcast(reasons), IDENTITY)
        errors = bad.select(
            *[F.col(c).alias(f.name) for c, f in zip(df.columns, schema.fields, strict=False)],
            F.lit(p.name).alias("processor"),
            F.lit(epoch).cast("long").alias("epoch"),
            F.col(REASON).alias("reason"),
        )
        return [good], errors
