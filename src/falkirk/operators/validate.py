"""``validate``: rows plus a ``reason`` column (null = valid); valid rows go on,
the rest (with their reason) to a second output for a dead-letter sink."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from falkirk.graph import GraphError
from falkirk.graph.specs import ValidateSpec
from falkirk.operators.base import Operator, Step, call_map, empty_frame

REASON = "reason"


class ValidateOperator(Operator):
    spec_type = ValidateSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, ValidateSpec)
        self.fn = spec.fn
        schema = call_map(self.fn, empty_frame(self.spark, inputs[0]), 0).schema
        if REASON not in schema.fieldNames():
            raise GraphError(f"the validate function must add a string column {REASON!r} (null for valid rows)")
        return {"valid": StructType([f for f in schema.fields if f.name != REASON]), "rejected": schema}

    def step(self, step: Step) -> dict[str, DataFrame]:
        # Both outputs read the checked rows: compute them once (freed at commit).
        checked = step.cache(call_map(self.fn, step.inputs[0], step.epoch))
        valid = checked.filter(F.col(REASON).isNull()).drop(REASON)
        return {"valid": valid, "rejected": checked.filter(F.col(REASON).isNotNull())}
