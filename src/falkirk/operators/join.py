"""``join``: a keyed stream-stream equi-join whose two sides' rows are kept as state.

Each side's rows are kept in a :class:`~falkirk.spark.rows.KeyedRows` (several rows
per key, with their arrival epoch). In epoch e the left rows L_e and the right rows
R_e meet what is stored:

* pairs = L_e ⋈ (right rows alive in e, R_e included) ∪ (left rows alive in e, L_e
  excluded) ⋈ R_e - so every pair of rows with equal keys is emitted exactly once,
  in the first epoch in which both have arrived (if both are still alive then);
* each new row records whether it met a match on arrival (``_early``), and is stored;
* ``how="left"`` (``"full"``): a left (right) row that arrived in e - N + 1, the last
  epoch it waits with a retention of N, is emitted with nulls for the other side if
  it met no match on arrival and no row of the other side arrived after it.

Both halves of an epoch: partitioning and sorting L_e and R_e does not depend on the
state and overlaps the previous epoch; the lookups are merge joins against the runs
in place. A checkpoint holds both sides' rows in one file schema (key columns,
``_side``, ``_a``, ``_early``, and each side's other columns as a struct).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from falkirk.graph import GraphError
from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import JoinSpec
from falkirk.operators.base import Chain, Operator, Step, require, state_columns
from falkirk.spark.files import check_stored_schema
from falkirk.spark.materialise import materialise
from falkirk.spark.rows import ARRIVED, KeyedRows, chain_files

EARLY = "_early"
SIDE = "_side"
NONE = "_none"
MATCHED = "_m"
RESERVED = (ARRIVED, EARLY, SIDE, MATCHED)


class JoinOperator(Operator):
    spec_type = JoinSpec

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        spec = self.processor.spec
        assert isinstance(spec, JoinSpec)
        self.on, self.how, self.retain = spec.on, spec.how, spec.retain
        left, right = inputs
        require(left, self.on, "its left input")
        require(right, self.on, "its right input")
        for k in self.on:
            if left[k].dataType != right[k].dataType:
                raise GraphError(
                    f"key column {k!r} is {left[k].dataType.simpleString()} on the left and "
                    f"{right[k].dataType.simpleString()} on the right; cast one side with a map"
                )
        self.left_cols = [f.name for f in left.fields if f.name not in self.on]
        self.right_cols = [f.name for f in right.fields if f.name not in self.on]
        clash = sorted(set(self.left_cols) & set(self.right_cols))
        if clash:
            raise GraphError(f"columns {clash} are on both sides; rename them on one side with a map before the join")
        reserved = sorted(set(left.fieldNames() + right.fieldNames()) & set(RESERVED))
        if reserved:
            raise GraphError(f"columns {reserved} are reserved by the join; rename them with a map")
        prefixed = sorted(k for k in self.on if k.startswith(("l_", "r_")))
        if prefixed:
            raise GraphError(
                f"key columns {prefixed} start with 'l_' or 'r_', which the join uses for the two sides' "
                "columns; rename them with a map"
            )
        flag = StructField(EARLY, BooleanType(), False)
        self.left = KeyedRows(self.spark, self.on, StructType([*left.fields, flag]), retain=self.retain)
        self.right = KeyedRows(self.spark, self.on, StructType([*right.fields, flag]), retain=self.retain)
        outer = self.how != "inner"
        fields = [left[k] for k in self.on]
        fields += [_nullable(left[c], outer) for c in self.left_cols]
        fields += [_nullable(right[c], outer) for c in self.right_cols]
        self.output = StructType(fields)
        self.left_struct = _struct([left[c] for c in self.left_cols])
        self.right_struct = _struct([right[c] for c in self.right_cols])
        return {"out": self.output}

    def state_signature(self) -> StateSignature:
        """Keys, each side's stored columns, and what decides when a row is emitted
        unmatched and dropped (``how``, ``retain``): rows stored under another
        retention would be matched and expire on another schedule."""
        keys = [f for f in self.left.schema.fields if f.name in self.on]
        columns = state_columns(StructType(keys))
        columns += state_columns(self.left_struct, "left.") + state_columns(self.right_struct, "right.")
        return StateSignature.of(
            self.processor.kind, keys=self.on, columns=columns, settings={"how": self.how, "retain": self.retain}
        )

    # -- an epoch -------------------------------------------------------------------

    def step(self, step: Step) -> dict[str, DataFrame]:
        epoch = step.epoch
        # State-independent half: the epoch's rows laid out like the stored runs.
        new_left = self.left.arrived(step.inputs[0].withColumn(EARLY, F.lit(False)), epoch)
        new_right = self.right.arrived(step.inputs[1].withColumn(EARLY, F.lit(False)), epoch)
        step.wait_previous()
        left_side = [*self.right.matches(self._probe(new_left, "l_"), epoch, prefix="r_"),
                     self._probe(new_left, "l_").hint("merge").join(self._probe(new_right, "r_"), list(self.on), "inner")]
        right_side = self.left.matches(self._probe(new_right, "r_"), epoch, prefix="l_")
        pairs = materialise(_union([self._pair(df) for df in [*left_side, *right_side]], self.output))
        self.left.retire(epoch, pairs)
        # Which new rows met a match on arrival (a matched key: every row of it did).
        left_keys = _union([df.select(*self.on) for df in left_side], None)
        right_keys = _union([df.select(*self.on) for df in [left_side[-1], *right_side]], None)
        self.left.add(self._flagged(new_left, left_keys, self.left), epoch, compact=False)
        self.right.add(self._flagged(new_right, right_keys, self.right), epoch, compact=False)
        for df in (new_left, new_right):
            self.left.retire(epoch, df)
        out = pairs
        if self.how in ("left", "full"):
            out = out.unionByName(self._unmatched(self.left, self.right, epoch, "left"))
        if self.how == "full":
            out = out.unionByName(self._unmatched(self.right, self.left, epoch, "right"))
        # Only now: compaction drops the rows whose last epoch this is, which the
        # unmatched rows above are read from (they keep the runs they were built on).
        self.left.maybe_compact(epoch)
        self.right.maybe_compact(epoch)
        return {"out": out}

    def _probe(self, rows: DataFrame, prefix: str) -> DataFrame:
        """A side's new rows with their non-key columns prefixed (kept partitioned)."""
        return rows.select(*self.on, *[F.col(c).alias(prefix + c) for c in rows.columns if c not in self.on])

    def _pair(self, joined: DataFrame) -> DataFrame:
        return joined.select(
            *self.on, *[F.col("l_" + c).alias(c) for c in self.left_cols], *[F.col("r_" + c).alias(c) for c in self.right_cols]
        )

    def _flagged(self, rows: DataFrame, matched_keys: DataFrame, state: KeyedRows) -> DataFrame:
        marks = matched_keys.distinct().withColumn(MATCHED, F.lit(True))
        flagged = rows.join(marks, list(self.on), "left").withColumn(EARLY, F.coalesce(F.col(MATCHED), F.lit(False)))
        return materialise(state.partitioned(flagged.select(*state.schema.fieldNames())))

    def _unmatched(self, side: KeyedRows, other: KeyedRows, epoch: int, which: str) -> DataFrame:
        """Rows of ``side`` in their last epoch (arrived in epoch - N + 1) that met no
        row of ``other``: on arrival, or from ``other`` rows that arrived after them."""
        assert self.retain is not None  # outer joins need a retention (JoinSpec)
        arrived = epoch - self.retain + 1
        expiring = side.rows((F.col(ARRIVED) == arrived) & ~F.col(EARLY))
        later = other.rows(F.col(ARRIVED) > arrived).select(*self.on).distinct()
        lonely = expiring.join(later, list(self.on), "left_anti")
        mine, theirs = (self.left_cols, self.right_struct) if which == "left" else (self.right_cols, self.left_struct)
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in theirs.fields]
        return lonely.select(*self.on, *mine, *nulls).select(*self.output.fieldNames())

    # -- state ----------------------------------------------------------------------

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        return self._as_file(self.left.checkpoint(epoch, base), "l").unionByName(
            self._as_file(self.right.checkpoint(epoch, base), "r")
        )

    def _as_file(self, rows: DataFrame, side: str) -> DataFrame:
        cols = self.left_cols if side == "l" else self.right_cols
        other = self.right_struct if side == "l" else self.left_struct
        mine = F.struct(*[F.col(c) for c in cols]) if cols else F.struct(F.lit(None).cast("boolean").alias(NONE))
        blank = F.lit(None).cast(other)
        return rows.select(
            *self.on,
            F.lit(side).alias(SIDE),
            ARRIVED,
            EARLY,
            (mine if side == "l" else blank).alias("l"),
            (mine if side == "r" else blank).alias("r"),
        )

    def file_schema(self) -> StructType:
        keys = [f for f in self.left.schema.fields if f.name in self.on]
        return StructType(
            [*keys, StructField(SIDE, StringType(), False), StructField(ARRIVED, LongType(), False),
             StructField(EARLY, BooleanType(), False), StructField("l", self.left_struct, True),
             StructField("r", self.right_struct, True)]
        )

    def restore(self, chain: Chain, epoch: int) -> None:
        files = chain_files(chain, epoch)
        check_stored_schema(self.spark, files, self.file_schema(), self.owner)
        rows = self.spark.read.schema(self.file_schema()).parquet(*files)
        for side, state, cols in (("l", self.left, self.left_cols), ("r", self.right, self.right_cols)):
            mine = rows.filter(F.col(SIDE) == side).select(
                *self.on, *[F.col(side).getField(c).alias(c) for c in cols], EARLY, ARRIVED
            )
            state.restore(mine, epoch)

    def held(self) -> list[DataFrame] | None:
        return [*self.left.runs, *self.right.runs]

    def reset(self) -> None:
        self.left.reset()
        self.right.reset()

    def release(self, committed: int) -> None:
        self.left.release(committed)
        self.right.release(committed)


def _struct(fields: list[StructField]) -> StructType:
    """A side's non-key columns as a struct (Parquet cannot write an empty struct)."""
    return StructType(fields or [StructField(NONE, BooleanType(), True)])


def _nullable(field: StructField, nullable: bool) -> StructField:
    return StructField(field.name, field.dataType, field.nullable or nullable)


def _union(frames: list[DataFrame], schema: StructType | None) -> DataFrame:
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out if schema is None else out.select(*schema.fieldNames())
