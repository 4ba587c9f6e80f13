"""``lookup``: each row of a stream with the current version of a keyed table.

The table arrives as a second input, a stream of upserts (each row is the new version
of its key), and is kept as :class:`~falkirk.spark.state.KeyedState`. In epoch e the
epoch's upserts are applied first, then every row of the stream looks its key up: a
row of epoch e sees the table as of the end of epoch e, whatever the order in which
Spark computes them. This is the Falkirk Wheel paper's Figure 1 "query joined with a
periodic batch computation": the batch side re-computes the table every N epochs and
emits it, the query side reads every epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from falkirk.graph import GraphError
from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import LookupSpec
from falkirk.operators.base import Step, require, state_columns
from falkirk.operators.keyed import KeyedOperator
from falkirk.spark.materialise import materialise

#: Helper columns of the lookup and of its keyed state's runs.
RESERVED = ("_v", "_found", "_epoch", "_deleted")


class LookupOperator(KeyedOperator):
    spec_type = LookupSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, LookupSpec)
        self.on, self.how = spec.on, spec.how
        stream, table = inputs
        require(stream, self.on, "its stream input")
        require(table, self.on, "its table input")
        for k in self.on:
            if stream[k].dataType != table[k].dataType:
                raise GraphError(
                    f"key column {k!r} is {stream[k].dataType.simpleString()} in the stream and "
                    f"{table[k].dataType.simpleString()} in the table; cast one with a map"
                )
        internal = sorted(c for c in {*stream.fieldNames(), *table.fieldNames()} if c in RESERVED or c.startswith("_run_"))
        if internal:
            raise GraphError(f"columns {internal} are reserved by the lookup's state (as is the prefix '_run_'); rename them with a map")
        self.table_cols = [f.name for f in table.fields if f.name not in self.on]
        if not self.table_cols:
            raise GraphError("the table has only key columns: nothing to look up")
        clash = sorted(set(self.table_cols) & set(stream.fieldNames()))
        if clash:
            raise GraphError(f"columns {clash} are in the stream and the table; rename one side with a map")
        self.make_state(self.on, StructType([table[k] for k in self.on] + [table[c] for c in self.table_cols]))
        self.stream_cols = stream.fieldNames()
        fields = [*stream.fields, *[StructField(c, table[c].dataType, True) for c in self.table_cols]]
        return {"out": StructType(fields)}

    def state_signature(self) -> StateSignature:
        """The table's keys and columns (how a stream row looks it up is not stored)."""
        return StateSignature.of(self.processor.kind, keys=self.on, columns=state_columns(self.state.schema))

    def step(self, step: Step) -> dict[str, DataFrame]:
        epoch = step.epoch
        rows = materialise(self.state.partitioned(step.inputs[0]))
        # One new version per key: the greatest row, so the result does not depend
        # on the order in which Spark meets several versions.
        newest = F.max(F.struct(*self.table_cols)).alias("_v")
        updates = step.inputs[1].groupBy(*self.on).agg(newest).select(*self.on, "_v.*")
        updates = materialise(self.state.partitioned(updates))
        for df in (rows, updates):
            self.state.retire(epoch, df)
        step.wait_previous()
        self.state.apply(updates, None, epoch, partitioned=True)
        found = self.state.with_stored(rows)
        if self.how == "inner":
            found = found.filter(F.col("_found"))
        return {"out": found.select(*self.stream_cols, *self.table_cols)}
