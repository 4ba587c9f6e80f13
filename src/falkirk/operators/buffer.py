"""``buffer``: every row received, kept partitioned by epoch; the paper's Buffer.

The state is one materialised DataFrame per epoch (plus one block restored from
checkpoints). Events of epoch t touch only t's part, so the operator never waits for
an earlier epoch: with several epochs in flight, a later epoch may reach it first.
That is why its checkpoints are *selective* (section 2.3 of the Falkirk Wheel paper):
the checkpoint of epoch A holds the parts of the epochs up to A and nothing of a
later epoch B, whichever arrived first, and a rollback to A restores exactly "all of
A, none of B". Processing B's rows before A's is a re-ordering section 3.3 allows
(no earlier message has a time <= A's), and the result does not depend on it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import BufferSpec
from falkirk.operators.base import Chain, Operator, Step, state_columns
from falkirk.recovery.chain import entries_to_restore
from falkirk.spark.files import check_stored_schema
from falkirk.spark.frames import empty
from falkirk.spark.materialise import materialise

TIME = "_time"


class BufferOperator(Operator):
    spec_type = BufferSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, BufferSpec)
        self.retain = spec.retain
        self.schema = inputs[0]
        self.file_schema = StructType([*inputs[0].fields, StructField(TIME, LongType(), False)])
        self._lock = threading.Lock()  # epochs in flight add parts from their threads
        self.parts: dict[int, DataFrame] = {}
        self.restored: DataFrame | None = None  # parts up to ``checkpointed``, read back
        self.checkpointed = 0  # parts up to this epoch are in some checkpoint
        #: Epochs in the order their rows arrived (what interleaving looked like).
        self.arrivals: list[int] = []
        self._retired: list[tuple[int, DataFrame]] = []
        return {"out": inputs[0]}

    def state_signature(self) -> StateSignature:
        """The rows' columns and how many epochs of them are kept."""
        return StateSignature.of(self.processor.kind, columns=state_columns(self.schema), settings={"retain": self.retain})

    def step(self, step: Step) -> dict[str, DataFrame]:
        # No step.wait_previous(): this epoch's part depends on no other epoch.
        part = materialise(step.inputs[0].withColumn(TIME, F.lit(step.version).cast("long")))
        with self._lock:
            self.parts[step.version] = part
            self.arrivals.append(step.version)
        return {"out": part.drop(TIME)}

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        """Selective: the parts of epochs up to ``epoch`` - all of them (``base``) or
        those after the previous checkpoint - never a later epoch's part that has
        arrived already."""
        with self._lock:
            low = 0 if base else self.checkpointed
            chosen = [df for t, df in sorted(self.parts.items()) if low < t <= epoch]
            if base and self.restored is not None:
                chosen.insert(0, self.restored.filter(F.col(TIME) <= epoch))
            self.checkpointed = max(self.checkpointed, epoch)
        out = empty(self.spark, self.file_schema)
        for df in chosen:
            out = out.unionByName(df)
        return out

    def restore(self, chain: Chain, epoch: int) -> None:
        """All of the epochs up to ``epoch``, none after: the chain's files from its
        last base at or before ``epoch`` (:func:`~falkirk.recovery.chain.entries_to_restore`,
        which raises if there is none), keeping only rows of those epochs."""
        files = [f.path for entry in entries_to_restore(chain, epoch) for f in entry.files]
        check_stored_schema(self.spark, files, self.file_schema, self.owner)
        rows = self.spark.read.schema(self.file_schema).parquet(*files) if files else empty(self.spark, self.file_schema)
        self.reset()
        with self._lock:
            self.restored = materialise(rows.filter(F.col(TIME) <= epoch))
            self.checkpointed = epoch

    def held(self) -> list[DataFrame] | None:
        with self._lock:
            return ([self.restored] if self.restored is not None else []) + list(self.parts.values())

    def reset(self) -> None:
        with self._lock:
            for t, df in self.parts.items():
                self._retired.append((t, df))
            if self.restored is not None:
                self._retired.append((0, self.restored))
            self.parts, self.restored, self.checkpointed = {}, None, 0

    def release(self, committed: int) -> None:
        """Free what rollbacks replaced, and with ``retain=N`` the parts of epochs up
        to ``committed - N`` (no checkpoint of a later epoch holds them: retention
        counts back from the checkpoint's epoch)."""
        with self._lock:
            if self.retain is not None:
                old = [t for t in self.parts if t <= committed - self.retain]
                self._retired += [(t, self.parts.pop(t)) for t in old]
                if self.restored is not None:
                    self.restored = self.restored.filter(F.col(TIME) > committed - self.retain)
            free = [df for _, df in self._retired]
            self._retired = []
        for df in free:
            df.unpersist()

    def rows(self) -> DataFrame:
        """Every row held, with the epoch it arrived in (``_time``)."""
        with self._lock:
            held = ([self.restored] if self.restored is not None else []) + list(self.parts.values())
            low = None if self.retain is None else max(self.parts, default=0) - self.retain
        out = empty(self.spark, self.file_schema)
        for df in held:
            out = out.unionByName(df)
        return out if low is None else out.filter(F.col(TIME) > low)
