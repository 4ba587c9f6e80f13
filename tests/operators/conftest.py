"""Running one operator by hand: set up on schemas, one step per epoch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from falkirk.graph import Input, Policy, Processor, Stateless
from falkirk.graph.specs import OperatorSpec
from falkirk.operators import Operator, Step, operator_for


class Harness:
    """One processor's operator, stepped epoch by epoch outside any engine."""

    def __init__(self, spark: SparkSession, spec: OperatorSpec, schemas: Sequence[str], policy: Policy | None = None) -> None:
        self.spark = spark
        inputs = tuple(Input(f"in{k}", "out") for k in range(len(schemas)))
        self.processor = Processor("op", spec, inputs, policy or Stateless())
        self.operator: Operator = operator_for(self.processor, spark)
        self.input_schemas = [spark.createDataFrame([], s).schema for s in schemas]
        self.outputs = self.operator.set_up(self.input_schemas)
        self.epoch = 0

    def frame(self, k: int, rows: Sequence[tuple[Any, ...]]) -> DataFrame:
        return self.spark.createDataFrame(list(rows), self.input_schemas[k])

    def step(self, *inputs: Sequence[tuple[Any, ...]], port: str = "out") -> list[dict[str, Any]]:
        """Run the next epoch on these rows (one list per input); its rows on ``port``."""
        self.epoch += 1
        out = self.operator.step(Step(self.epoch, [self.frame(k, rows) for k, rows in enumerate(inputs)]))
        rows = [r.asDict() for r in out[port].collect()] if port in out else []
        self.operator.release(self.epoch)
        return rows


@pytest.fixture
def harness(spark: SparkSession):  # type: ignore[no-untyped-def]
    def make(spec: OperatorSpec, *schemas: str, policy: Policy | None = None) -> Harness:
        return Harness(spark, spec, schemas, policy)

    return make
