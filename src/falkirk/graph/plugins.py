"""The plug-in points of a pipeline: what a source and a sink must provide.

The engine calls these from the driver; the DataFrames they return or receive are
processed by Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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

    def read(self, spark: SparkSession, offsets: dict[str, Any]) -> DataFrame:
        """The rows of one epoch."""
        ...

    # Optional: ``count_records(self, offsets: dict[str, Any]) -> int``: the records
    # of these offsets when the offsets say it without reading anything (a range of
    # stream entries, a generated batch), for progress displays. Without it the
    # engine counts the rows as Spark reads them (an observation of the output).

    # Optional: ``acknowledge(self, offsets: list[dict[str, Any]]) -> None``. Called
    # with the offsets of epochs no recovery will ever read again (the monitor's
    # ACK_SOURCE decisions, once the commits behind them are durable), in epoch order;
    # the source may tell its service to forget that input. Must be idempotent: after
    # a crash the same offsets may be acknowledged again.

    def check(self, offsets: dict[str, Any]) -> None:
        """Raise a :class:`~falkirk.exceptions.FalkirkError` if the input of these
        offsets can no longer be read as planned. Called again before the epoch
        commits, so that input changed while the epoch was being read is not
        committed."""
        ...


class Sink(Protocol):
    """Receives each epoch's rows; writing the same epoch again must replace, not add.
    A sink with a true class attribute ``ordered`` gets its epochs in order (the
    write of epoch e starts after that of e-1 finished)."""

    def prepare(self, empty: DataFrame) -> None:
        """Called once at start with an empty DataFrame of the input schema."""
        ...

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write one epoch; returns the files to commit (size-checked on recovery)."""
        ...


@runtime_checkable
class TransactionalSink(Protocol):
    """A sink whose epochs become visible only when no recovery can take them back.

    * :meth:`pre_commit` (while the epoch is computed, in epoch order): write the
      epoch durably but invisibly (a prepared transaction, a hidden file);
    * :meth:`commit_upto` (once the monitor releases the sink's output up to an epoch:
      no rollback can retract it any more): make every pre-committed epoch up to it
      visible, in order;
    * :meth:`abort_after` (on a rollback to an epoch, also after a restart): discard
      every pre-committed epoch after it; they will be written again.

    All three must be idempotent: after a crash the engine repeats what it cannot
    know was done, deciding from its committed metadata alone.
    """

    def prepare(self, empty: DataFrame) -> None: ...

    def bind(self, pipeline: str, processor: str) -> None:
        """Called before :meth:`prepare`: the names that identify this sink's
        transactions (e.g. two-phase-commit transaction ids)."""
        ...

    def pre_commit(self, df: DataFrame, epoch: int) -> list[StoredFile]: ...

    def commit_upto(self, epoch: int) -> None: ...

    def abort_after(self, epoch: int) -> None: ...


@runtime_checkable
class CommitVisibleSink(Protocol):
    """A transactional sink that shows an epoch once it is committed, before the
    monitor releases it (:class:`~falkirk.io.ParquetTableSink`'s default
    ``visibility="committed"``): :meth:`publish_upto` is called right after each
    metadata commit, and after a restart with what the recovery kept."""

    def publish_upto(self, epoch: int) -> None:
        """Make every pre-committed epoch up to ``epoch`` (all committed) visible, in
        order; idempotent (after a crash the engine calls it again)."""
        ...


@runtime_checkable
class LeasedSink(Protocol):
    """A transactional sink whose external system can tell two drivers of one
    storage root apart (two copies of a root started side by side): it holds a lease
    keyed by the root's identity (:meth:`TransactionalSink.bind`'s ``pipeline``)
    while the run lasts, and refuses to start while another driver holds it."""

    def take_lease(self, *, shared: bool) -> None:
        """Called after :meth:`TransactionalSink.bind`, before anything is written or
        resolved: take the lease, or raise a :class:`~falkirk.exceptions.FalkirkError`
        naming the holder. ``shared``: the two members of a driver pair share the
        identity by design, and take none."""
        ...

    def drop_lease(self) -> None:
        """Called when the run ends (idempotent)."""
        ...
