"""``sink``: an epoch's rows written to a :class:`~falkirk.graph.Sink`, exactly once.

A plain sink writes each epoch during the epoch and replaces an epoch written before
(its output is visible once written: a recovery may rewrite it with the same rows).
A :class:`~falkirk.graph.TransactionalSink` pre-commits each epoch, in epoch order,
and makes it visible only when the monitor releases it (no rollback can retract it);
a rollback aborts what it pre-committed after the rollback's epoch. The files a sink
returns are committed with the epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph import TransactionalSink
from falkirk.graph.specs import SinkSpec
from falkirk.operators.base import Operator, Step
from falkirk.spark.frames import empty
from falkirk.storage import StoredFile


class SinkOperator(Operator):
    spec_type = SinkSpec

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
        self.writer.prepare(empty(self.spark, self.schema))

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {}

    def emit(self, step: Step) -> list[StoredFile] | None:
        if isinstance(self.writer, TransactionalSink):
            step.wait_previous()  # pre-commits in epoch order (a transaction waits for none)
            return list(self.writer.pre_commit(step.inputs[0], step.epoch))
        if getattr(self.writer, "ordered", False):
            step.wait_previous()  # the sink writes epochs in order
        return list(self.writer.write(step.inputs[0], step.epoch))

    def release_output(self, upto: int) -> None:
        if isinstance(self.writer, TransactionalSink):
            self.writer.commit_upto(upto)

    def abort_output(self, after: int) -> None:
        if isinstance(self.writer, TransactionalSink):
            self.writer.abort_after(after)
