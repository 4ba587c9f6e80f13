"""``map``: any DataFrame -> DataFrame function, per epoch (stateless)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph.specs import MapSpec
from falkirk.operators.base import Operator, Step, call_map, empty_frame


class MapOperator(Operator):
    spec_type = MapSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, MapSpec)
        self.fn = spec.fn
        return {"out": call_map(self.fn, empty_frame(self.spark, inputs[0]), 0).schema}

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {"out": call_map(self.fn, step.inputs[0], step.epoch)}
