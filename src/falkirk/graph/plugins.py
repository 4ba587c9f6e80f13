"""The plug-in points of a pipeline: what a source and a sink must provide.

The engine calls these from the driver; the DataFrames they return or receive are
processed by Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from falkirk.storage import StoredFile


class Source(Protocol):
    """Cuts its input into epochs. An epoch's *offsets* - a JSON object the source
    defines - say exactly which input the epoch reads and where the source stands
    after it; they are committed before the epoch runs, and :meth:`read` must return
    the same rows for the same offsets on a replay (or raise a
    :class:`~falkirk.exceptions.FalkirkError` saying why it cannot)."""

    def struct(self, spark: SparkSession) -> StructType:
        """The schema of the rows :meth:`read` returns."""
        ...

    def next_offsets(self, previous: dict[str, Any] | None) -> dict[str, Any] | None:
        """The offsets of the next epoch, given ``previous``: the offsets of the last
        epoch that read from this source (None before the first). None when no new
        input is there (yet). Must not depend on any older offsets: they are
        forgotten once no recovery can need them."""
        ...

    def count_records(self, offsets: dict[str, Any]) -> int:
        """Records in these offsets, for progress displays only."""
        ...

    def read(self, spark: SparkSession, offsets: dict[str, Any]) -> DataFrame:
        """The rows of one epoch."""
        ...

    def check(self, offsets: dict[str, Any]) -> None:
        """Raise a :class:`~falkirk.exceptions.FalkirkError` if the input of these
        offsets can no longer be read as planned. Called again before the epoch
        commits, so that input changed while the epoch was being read is not
        committed."""
        ...


class Sink(Protocol):
    """Receives each epoch's rows; writing the same epoch again must replace, not add."""

    def prepare(self, empty: DataFrame) -> None:
        """Called once at start with an empty DataFrame of the input schema."""
        ...

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch; returns the files to commit (size-checked on recovery)."""
        ...
