"""A digest of the rows an epoch read, taken while Spark reads them for the epoch.

A replay must read exactly the input its epoch was planned with. A file source
checks that by each file's size and modification time, which is cheap, but which a
file put back as it was (copied from a backup, restored after a mistaken deletion)
does not keep: its modification time is new. So the engine also observes a
:class:`RowsDigest` of each epoch's rows - a count and a hash of the multiset of rows -
in the job that reads them anyway (a Spark observation: no job, no read of its own,
nothing read in the driver), and commits it with the epoch's offsets. A replay that
finds a file with its size but not its modification time reads the epoch's files
once more in one Spark job and compares digests: equal, the files give the same rows
and the replay goes on; different, it stops.

What it guarantees: a restored file is accepted only if the epoch's files give the
same rows as when the epoch was first read, up to a 64-bit hash collision of row
sums. It does not prove the bytes equal (a CSV whose rows parse the same is the same
input to the pipeline). A digest is committed with its epoch (or a later commit,
when Spark reports it late), and only from a run of the epoch that computed without
a failure (:mod:`falkirk.execution.digesting`); an epoch without one (not committed,
or a consumer read only part of its rows) has its restored files refused as before,
with the advice to give them back their modification time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from falkirk.spark.frames import has_map

#: The key of an epoch's offsets that holds its digest (:meth:`RowsDigest.to_json`).
DIGEST_KEY = "digest"
#: Numbers making each observation's name unique in the process.
_NAMES = itertools.count(1)
_LOW = 0xFFFFFFFF


@dataclass(frozen=True)
class RowsDigest:
    """The rows of some input files: how many, and the sums of the low and high 32
    bits of each row's 64-bit hash (a multiset hash: the rows' order and partitioning
    do not change it, every row does)."""

    files: tuple[str, ...]
    rows: int
    low: int
    high: int

    def to_json(self) -> dict[str, Any]:
        return {"files": list(self.files), "rows": self.rows, "low": self.low, "high": self.high}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RowsDigest:
        return cls(tuple(doc["files"]), int(doc["rows"]), int(doc["low"]), int(doc["high"]))

    def same_rows(self, other: RowsDigest) -> bool:
        return (self.rows, self.low, self.high) == (other.rows, other.low, other.high)


def row_hash(df: DataFrame, columns: list[str] | None = None) -> Column:
    """``xxhash64`` of each row's ``columns`` (default: all), with whether each is
    null: the hash skips nulls, so ``(null, 'a')`` and ``('a', null)`` would hash alike
    without it. Columns holding maps (which ``xxhash64`` does not take) are hashed as JSON."""
    names = df.columns if columns is None else columns
    values = [F.to_json(F.struct(F.col(c))) if has_map(df.schema[c].dataType) else F.col(c) for c in names]
    return F.xxhash64(*[F.isnull(F.col(c)) for c in names], *values)


def _aggregates(df: DataFrame) -> list[Column]:
    h = row_hash(df)
    # try_sum: an epoch of over 2^31 rows would overflow; it then has no digest (null).
    return [
        F.count(F.lit(1)).alias("rows"),
        F.try_sum(h.bitwiseAND(F.lit(_LOW))).alias("low"),
        F.try_sum(F.shiftrightunsigned(h, 32)).alias("high"),
    ]


def observe(df: DataFrame, label: str) -> tuple[DataFrame, Observation]:
    """``df`` with its digest observed by the first job that computes all of it. The
    observation's name is unique: Spark hands a query's metrics to the observation
    registered under the name, and a query of an earlier run of the same epoch (a
    failed one) must not complete this one."""
    observation = Observation(f"{label} {next(_NAMES)}")
    return df.observe(observation, *_aggregates(df)), observation


def reported(observation: Observation) -> bool:
    """Whether Spark has reported ``observation``'s metrics; never waits."""
    jo = observation._jo
    return jo is not None and bool(jo.future().isCompleted())


def arrived(observation: Observation, files: list[str]) -> RowsDigest | None:
    """The digest ``observation`` saw of the rows of ``files``, or None if Spark has
    not reported it (yet) or it overflowed; never waits."""
    if not reported(observation):
        return None
    return _digest(files, observation.get)


def digest_of(df: DataFrame, files: list[str]) -> RowsDigest | None:
    """The digest of ``df``, the rows of ``files``, computed now (one Spark job)."""
    return _digest(files, df.agg(*_aggregates(df)).first().asDict())  # type: ignore[union-attr]


def _digest(files: list[str], values: dict[str, Any]) -> RowsDigest | None:
    rows, low, high = int(values["rows"]), values.get("low"), values.get("high")
    if rows and (low is None or high is None):
        return None  # the sums overflowed
    return RowsDigest(tuple(files), rows, int(low or 0), int(high or 0))
