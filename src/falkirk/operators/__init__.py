"""Operators: what each kind of processor does on Spark, one module per kind.

Every operator implements the small protocol of :class:`~falkirk.operators.base.Operator`
(schemas, the two halves of an epoch, its state's checkpoints and restore); the
engine runs them all the same way. :data:`OPERATORS` maps each spec type
(:mod:`falkirk.graph.specs`) to its implementation. A new operator is one module
here - its spec and its :class:`~falkirk.operators.base.Operator` - and one entry in
:data:`OPERATORS` (or :func:`register` from your own code).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from falkirk.graph import GraphError, Processor
from falkirk.graph.specs import OperatorSpec
from falkirk.operators.aggregate import AggregateOperator
from falkirk.operators.base import Operator, Step
from falkirk.operators.buffer import BufferOperator
from falkirk.operators.exchange import ExchangeOperator
from falkirk.operators.join import JoinOperator
from falkirk.operators.lookup import LookupOperator
from falkirk.operators.loop import EnterOperator, FeedbackOperator, LeaveOperator
from falkirk.operators.map import MapOperator
from falkirk.operators.sequence import NumberOperator, RegroupOperator
from falkirk.operators.sink import SinkOperator
from falkirk.operators.source import SourceOperator
from falkirk.operators.stateful import StatefulOperator
from falkirk.operators.union import UnionOperator
from falkirk.operators.validate import ValidateOperator
from falkirk.operators.window import WindowOperator

#: The implementation of every spec type.
OPERATORS: dict[type[OperatorSpec], type[Operator]] = {
    op.spec_type: op
    for op in (
        SourceOperator,
        MapOperator,
        ValidateOperator,
        ExchangeOperator,
        AggregateOperator,
        StatefulOperator,
        SinkOperator,
        UnionOperator,
        JoinOperator,
        LookupOperator,
        EnterOperator,
        FeedbackOperator,
        LeaveOperator,
        BufferOperator,
        NumberOperator,
        RegroupOperator,
        WindowOperator,
    )
}


def register(operator: type[Operator]) -> type[Operator]:
    """Register an operator for its ``spec_type`` (usable as a class decorator)."""
    OPERATORS[operator.spec_type] = operator
    return operator


def operator_for(processor: Processor, spark: SparkSession, pipeline: str = "") -> Operator:
    """The operator running ``processor`` of the pipeline named ``pipeline``."""
    implementation = OPERATORS.get(type(processor.spec))
    if implementation is None:
        raise GraphError(
            f"processor {processor.name!r}: no operator is registered for {type(processor.spec).__name__}; "
            "register one with falkirk.operators.register"
        )
    operator = implementation(processor, spark)
    operator.pipeline = pipeline
    return operator


__all__ = ["OPERATORS", "Operator", "Step", "operator_for", "register"]
