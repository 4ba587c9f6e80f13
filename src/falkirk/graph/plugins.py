"""The plug-in points of a pipeline: what a source and a sink must provide.

The engine calls these from the driver; the DataFrames they return or receive are
processed by Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from falkirk.storage import StoredFile


class Source(Protocol):
    """Cuts its input into epochs. An epoch's offsets (a JSON-able list of strings)
    are committed before the epoch runs, and :meth:`read` must return the same rows
    for the same offsets on a replay."""

    def struct(self, spark: SparkSession) -> StructType:
        """The schema of the rows :meth:`read` returns."""
        ...

    def next_offsets(self, consumed: set[str]) -> list[str] | None:
        """The offsets of the next epoch, given all offsets consumed so far; None when
        no new input is there (yet)."""
        ...

    def count_records(self, offsets: Sequence[Any]) -> int:
        """Records in these offsets, for progress displays only."""
        ...

    def read(self, spark: SparkSession, offsets: Sequence[Any]) -> DataFrame:
        """The rows of one epoch."""
        ...


class Sink(Protocol):
    """Receives each epoch's rows; writing the same epoch again must replace, not add."""

    def prepare(self, empty: DataFrame) -> None:
        """Called once at start with an empty DataFrame of the input schema."""
        ...

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch; returns the files to commit (size-checked on recovery)."""
        ...
