"""``exchange``: rows repartitioned by key, so that all rows of a key meet."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph.specs import ExchangeSpec
from falkirk.operators.base import Operator, Step, require


class ExchangeOperator(Operator):
    spec_type = ExchangeSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, ExchangeSpec)
        self.key = spec.key
        require(inputs[0], self.key)
        return {"out": inputs[0]}

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {"out": step.inputs[0].repartition(*self.key)}
