"""``sink``: an epoch's rows written to a :class:`~falkirk.graph.Sink`, exactly once.

A plain sink writes each epoch during the epoch and replaces an epoch written before
(its output is visible once written: a recovery may rewrite it with the same rows).
A :class:`~falkirk.graph.TransactionalSink` pre-commits each epoch, in epoch order,
and makes it visible only when the monitor releases it (no rollback can retract it),
or, a :class:`~falkirk.graph.plugins.CommitVisibleSink`, once the epoch is committed;
a rollback aborts what it pre-committed after the rollback's epoch. The files a sink
returns are committed with the epoch.

In a driver pair an :class:`Egress` decides which driver writes each epoch: the other
takes the writer's files instead of writing. Nothing is aborted then: an epoch's rows
are the same whichever driver computes them (the pair shares its input), and the
other driver may be counting on them; a replay finds the epoch written and skips it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph import TransactionalSink
from falkirk.graph.plugins import CommitVisibleSink, LeasedSink
from falkirk.graph.specs import SinkSpec
from falkirk.operators.base import Operator, Step
from falkirk.spark.frames import empty
from falkirk.storage import StoredFile


class Egress(Protocol):
    """A driver pair's choice of the one driver that writes each epoch of a sink
    (:class:`falkirk.storage.pairs.PairStore`)."""

    def claim(self, sink: str, epoch: int) -> list[StoredFile] | None: ...

    def written(self, sink: str, epoch: int, files: list[StoredFile]) -> None: ...

    def releasing(self, sink: str) -> AbstractContextManager[None]: ...


class SinkOperator(Operator):
    spec_type = SinkSpec
    #: Set by the engine of a driver pair.
    egress: Egress | None = None

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, SinkSpec)
        self.writer = spec.writer
        self.transactional = isinstance(self.writer, TransactionalSink)
        self.schema = inputs[0]
        return {}

    def start(self) -> None:
        if isinstance(self.writer, TransactionalSink):
            self.writer.bind(self.pipeline, self.name)
            if isinstance(self.writer, LeasedSink):
                self.writer.take_lease(shared=self.egress is not None)
        self.writer.prepare(empty(self.spark, self.schema))

    def stop(self) -> None:
        if isinstance(self.writer, LeasedSink):
            self.writer.drop_lease()

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {}

    def emit(self, step: Step) -> list[StoredFile] | None:
        ordered = isinstance(self.writer, TransactionalSink) or getattr(self.writer, "ordered", False)
        if ordered:
            step.wait_previous()  # pre-commits (writes) in epoch order (a transaction waits for none)
        if self.egress is not None:
            theirs = self.egress.claim(self.name, step.epoch)
            if theirs is not None:  # the pair's other driver wrote it
                return theirs
        if isinstance(self.writer, TransactionalSink):
            files = list(self.writer.pre_commit(step.inputs[0], step.epoch))
        else:
            files = list(self.writer.write(step.inputs[0], step.epoch))
        if self.egress is not None:
            self.egress.written(self.name, step.epoch, files)
        return files

    def publish_output(self, upto: int) -> None:
        if isinstance(self.writer, CommitVisibleSink):
            with self.egress.releasing(self.name) if self.egress is not None else nullcontext():
                self.writer.publish_upto(upto)

    def release_output(self, upto: int) -> None:
        if isinstance(self.writer, TransactionalSink):
            with self.egress.releasing(self.name) if self.egress is not None else nullcontext():
                self.writer.commit_upto(upto)

    def abort_output(self, after: int) -> None:
        if isinstance(self.writer, TransactionalSink) and self.egress is None:
            self.writer.abort_after(after)
