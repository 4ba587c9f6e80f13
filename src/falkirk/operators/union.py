"""``union``: the rows of two or more streams with the same columns, as one stream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import DataType, StructType

from falkirk.graph import GraphError
from falkirk.graph.specs import UnionSpec
from falkirk.operators.base import Operator, Step


class UnionOperator(Operator):
    spec_type = UnionSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        first = {f.name: f.dataType for f in inputs[0].fields}
        for k, schema in enumerate(inputs[1:], start=1):
            other = {f.name: f.dataType for f in schema.fields}
            if other != first:
                source = self.processor.inputs[k].key
                raise GraphError(
                    f"input {k} ({source}) has columns {_describe(other)}, input 0 "
                    f"({self.processor.inputs[0].key}) has {_describe(first)}: a union needs the "
                    "same names and types; add a map that selects and casts them"
                )
        return {"out": inputs[0]}

    def step(self, step: Step) -> dict[str, DataFrame]:
        out = step.inputs[0]
        for df in step.inputs[1:]:
            out = out.unionByName(df)
        return {"out": out}


def _describe(columns: Mapping[str, DataType]) -> str:
    return ", ".join(f"{name} {dtype.simpleString()}" for name, dtype in columns.items())
