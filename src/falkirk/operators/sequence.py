"""The translators of a sequence-number region (:mod:`falkirk.graph.sequences`).

``number`` gives each record of an epoch its sequence number in a column ``_seq``:
epoch e's records in the order of their partitions, ``(e - 1) * SEQ_BLOCK + 1``
onwards (:mod:`falkirk.time.ticks`). The numbering runs in Spark: one small job
counts each partition's rows, then each row's number is its partition's offset plus
its place in the partition - no record goes through the driver. It is computed once
per epoch and logged (the spec's only policy), so a replay sees the same numbers.

``regroup`` passes rows on unchanged: the engine hands it all of an epoch's rows at
once, after the region's last chunk (:mod:`falkirk.execution.sequence_stage`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from falkirk.graph import GraphError
from falkirk.graph.specs import NumberSpec, RegroupSpec
from falkirk.operators.base import Operator, Step
from falkirk.time.ticks import SEQ_BLOCK

#: The column holding a record's sequence number inside a region.
SEQ_COLUMN = "_seq"
#: ``monotonically_increasing_id`` keeps the row's place in its partition in the
#: low 33 bits.
_PLACE_BITS = 33


class NumberOperator(Operator):
    spec_type = NumberSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        #: Records numbered per epoch this run (the region's stage reads it instead
        #: of counting again; an epoch re-sent from the log is not in it).
        self.counts: dict[int, int] = {}
        if SEQ_COLUMN in inputs[0].fieldNames():
            raise GraphError(f"its input has a column {SEQ_COLUMN!r}, which the region's numbers use; rename it")
        return {"out": StructType([*inputs[0].fields, StructField(SEQ_COLUMN, LongType(), False)])}

    def step(self, step: Step) -> dict[str, DataFrame]:
        df = step.cache(step.inputs[0])  # the rows counted are the rows numbered
        part = F.spark_partition_id()
        counts = sorted((int(r[0]), int(r[1])) for r in df.groupBy(part.alias("p")).count().collect())
        total = sum(n for _, n in counts)
        if total > SEQ_BLOCK - 2:
            raise GraphError(
                f"epoch {step.epoch} brings {total} records into region {self.processor.spec.sequence!r} "  # type: ignore[attr-defined]
                f"(at most {SEQ_BLOCK - 2}). The epoch's input is fixed in this storage root's plan, so "
                "a restart fails the same way: split the input into smaller files and run on a new storage root"
            )
        self.counts[step.epoch] = total
        if not counts:
            return {"out": df.withColumn(SEQ_COLUMN, F.lit(0).cast("long"))}
        offsets, below = [], (step.epoch - 1) * SEQ_BLOCK
        for p, n in counts:
            offsets += [F.lit(p), F.lit(below)]
            below += n
        place = F.monotonically_increasing_id() - F.shiftleft(part.cast("long"), _PLACE_BITS)
        return {"out": df.withColumn(SEQ_COLUMN, F.create_map(*offsets)[part] + place + 1)}


class RegroupOperator(Operator):
    spec_type = RegroupSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        return {"out": inputs[0]}

    def step(self, step: Step) -> dict[str, DataFrame]:
        return {"out": step.inputs[0]}
