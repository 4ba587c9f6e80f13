"""The edges of a loop region (:mod:`falkirk.graph.loops`) as operators: ``enter``,
``feedback`` and ``leave`` pass their input on unchanged. What makes them a loop is
when the engine runs them (:mod:`falkirk.execution.loop_stage`): ``enter`` hands epoch e's rows
to iteration 0, a ``feedback`` hands iteration i's rows to iteration i + 1, and
``leave`` gets the rows of every iteration of epoch e at once."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph import GraphError
from falkirk.graph.specs import EnterSpec, FeedbackSpec, LeaveSpec
from falkirk.operators.base import Operator, Step


class _PassOn(Operator):
    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        return {"out": inputs[0]}

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {"out": step.inputs[0]}


class EnterOperator(_PassOn):
    spec_type = EnterSpec


class LeaveOperator(_PassOn):
    spec_type = LeaveSpec


class FeedbackOperator(_PassOn):
    """Its schema is declared (the feedback is set up before its input exists) and
    checked against its input once that is set up (:meth:`check_input`)."""

    spec_type = FeedbackSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, FeedbackSpec)
        try:
            self.schema = self.spark.createDataFrame([], spec.schema).schema
        except Exception as exc:
            raise GraphError(f"feedback schema {spec.schema!r} is not a valid DDL schema: {exc}") from exc
        return {"out": self.schema}

    def check_input(self, schema: StructType) -> None:
        """Raise :class:`GraphError` unless ``schema`` (the input's) has the declared
        columns and types."""
        want = [(f.name, f.dataType) for f in self.schema.fields]
        got = [(f.name, f.dataType) for f in schema.fields]
        if want != got:
            show = ", ".join(f"{n} {t.simpleString()}" for n, t in got)
            raise GraphError(
                f"its input {self.processor.inputs[0].key} has columns ({show}), the feedback declares "
                f"({self.processor.spec.schema}); declare the input's columns, or select and cast them"  # type: ignore[attr-defined]
            )
