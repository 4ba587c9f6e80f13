"""``sink``: an epoch's rows written to a :class:`~falkirk.graph.Sink`, exactly once
(the sink replaces an epoch written before); the files it returns are committed
with the epoch."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

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
        self.schema = inputs[0]
        return {}

    def start(self) -> None:
        self.writer.prepare(empty(self.spark, self.schema))

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {}

    def emit(self, step: Step) -> list[StoredFile] | None:
        return list(self.writer.write(step.inputs[0], step.epoch))
