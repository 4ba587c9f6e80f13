"""``source``: an epoch's rows from a :class:`~falkirk.graph.Source`, exactly the rows
its committed offsets name (nothing when the source had nothing new)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph.specs import SourceSpec
from falkirk.operators.base import Operator, Step
from falkirk.spark.frames import empty


class SourceOperator(Operator):
    spec_type = SourceSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, SourceSpec)
        self.reader = spec.reader
        self.schema = self.reader.struct(self.spark)
        return {"out": self.schema}

    def step(self, step: Step) -> dict[str, DataFrame]:
        if step.offsets is None:  # nothing new from this source in this epoch
            return {"out": empty(self.spark, self.schema)}
        return {"out": self.reader.read(self.spark, step.offsets)}

    def acknowledge(self, offsets: list[dict[str, Any]]) -> None:
        acknowledge = getattr(self.reader, "acknowledge", None)  # optional in the protocol
        if acknowledge is not None:
            acknowledge(offsets)
