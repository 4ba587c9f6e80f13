"""Keyed state as a log-structured merge of partitioned runs: it must hold exactly
what a plain dictionary holds, through deltas, compactions, checkpoints and
restores - and an epoch must not shuffle the stored runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from falkirk.spark.state import KeyedState
from falkirk.storage import LocalFileSystem

SCHEMA = StructType([StructField("k", LongType()), StructField("v", LongType())])


def live(state: KeyedState) -> dict[int, int]:
    return {r["k"]: r["v"] for r in state.df.collect()}


@pytest.mark.parametrize("keep_tombstones", [True, False])
def test_state_matches_a_dictionary(spark: SparkSession, tmp_path: Path, keep_tombstones: bool) -> None:
    rng = random.Random(7)
    state = KeyedState(spark, ["k"], SCHEMA, keep_tombstones=keep_tombstones, compact_every=3)
    model: dict[int, int] = {}
    checkpoints: list[tuple[int, str, list]] = []
    snapshots: dict[int, dict[int, int]] = {}
    fs = LocalFileSystem()
    for epoch in range(1, 11):
        changed = {k: rng.randrange(1000) for k in rng.sample(range(40), 8)}
        deleted = [k for k in rng.sample(sorted(model), min(3, len(model))) if k not in changed]
        out = state.apply(
            spark.createDataFrame(sorted(changed.items()), "k long, v long"),
            spark.createDataFrame([(k,) for k in deleted], "k long"),
            epoch,
        )
        assert {r["k"]: r["v"] for r in out.collect()} == changed  # the epoch's output
        model.update(changed)
        for k in deleted:
            model.pop(k)
        assert live(state) == model, f"after epoch {epoch}"
        found = state.with_stored(spark.createDataFrame([(k,) for k in range(45)], "k long"))
        assert {r["k"]: r["v"] for r in found.collect() if r["_found"]} == model
        if keep_tombstones and epoch % 2 == 0:  # base at 2, deltas after
            base = epoch == 2
            files = state.write_checkpoint(str(tmp_path / "ck"), epoch, base, fs)
            checkpoints.append((epoch, "base" if base else "delta", files))
            snapshots[epoch] = dict(model)
    if keep_tombstones:
        for epoch, snapshot in snapshots.items():
            restored = KeyedState(spark, ["k"], SCHEMA)
            restored.restore(checkpoints, epoch)
            assert live(restored) == snapshot, f"restore at {epoch}"


def test_an_epoch_shuffles_only_its_own_keys(spark: SparkSession) -> None:
    state = KeyedState(spark, ["k"], SCHEMA, compact_every=100)
    for epoch in range(1, 4):
        state.apply(spark.range(epoch * 100).selectExpr("id AS k", "id AS v"), None, epoch)
    keys = state.partitioned(spark.range(50).selectExpr("id AS k"))
    plan = state.with_stored(keys)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan  # the keys' own shuffle; runs are read in place
    assert plan.count("Sort [") == 1, plan  # the keys' own sort; runs are stored sorted
    assert plan.count("SortMergeJoin") == 4, plan  # base + 3 deltas, merged in place


def test_a_delta_checkpoint_reads_only_the_runs_changed_since_the_last(spark: SparkSession, tmp_path: Path) -> None:
    state = KeyedState(spark, ["k"], SCHEMA, compact_every=100)
    fs = LocalFileSystem()
    state.apply(spark.range(1000).selectExpr("id AS k", "id AS v"), None, 1)
    state.write_checkpoint(str(tmp_path), 1, True, fs)
    for epoch in (2, 3):
        state.apply(spark.range(epoch).selectExpr("id AS k", f"id + {epoch * 100} AS v"), None, epoch)
    state.write_checkpoint(str(tmp_path), 3, False, fs)
    state.apply(spark.range(4).selectExpr("id AS k", "id + 400 AS v"), None, 4)
    delta = state.checkpoint_rows(base=False)
    plan = delta._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Scan ExistingRDD") == 1, plan  # epoch 4's run; not the base nor 2-3
    assert sorted((r["k"], r["v"], r["_epoch"]) for r in delta.collect()) == [(k, k + 400, 4) for k in range(4)]
    state.write_checkpoint(str(tmp_path), 4, False, fs)
    assert state.checkpoint_rows(base=False).count() == 0  # nothing changed since
    state.compact()  # the base now holds epoch 4's rows too, all already checkpointed
    assert state.checkpoint_rows(base=False).count() == 0


def test_a_base_checkpoint_compacts_the_runs_and_writes_the_new_base(spark: SparkSession, tmp_path: Path) -> None:
    state = KeyedState(spark, ["k"], SCHEMA, compact_every=100)
    for epoch in (1, 2, 3):
        state.apply(spark.range(epoch * 10).selectExpr("id AS k", f"id * {epoch} AS v"), None, epoch)
    files = state.write_checkpoint(str(tmp_path), 3, True, LocalFileSystem())
    assert state.deltas == []  # compacted: later epochs look up one run
    written = {r["k"]: r["v"] for r in spark.read.parquet(*[f.path for f in files]).collect()}
    assert written == {k: k * 3 for k in range(30)} == live(state)


def test_a_restore_loads_in_the_background_and_a_corrupt_file_fails_its_first_use(spark: SparkSession, tmp_path: Path) -> None:
    fs = LocalFileSystem()
    state = KeyedState(spark, ["k"], SCHEMA)
    state.apply(spark.range(100).selectExpr("id AS k", "id AS v"), None, 1)
    chain = [(1, "base", state.write_checkpoint(str(tmp_path), 1, True, fs))]
    restored = KeyedState(spark, ["k"], SCHEMA)
    restored.restore(chain, 1)
    assert live(restored) == {k: k for k in range(100)}
    for f in chain[0][2]:  # (a missing file fails restore() itself: Spark checks paths)
        Path(f.path).write_bytes(b"not a parquet file")
    broken = KeyedState(spark, ["k"], SCHEMA)
    broken.restore(chain, 1)  # returns: the rows are read in the background
    with pytest.raises(Exception, match=r"(?i)parquet"):
        broken.df.collect()


def _estimated_bits(df) -> int:  # type: ignore[no-untyped-def]
    return int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()).bit_length()


def test_plan_statistics_stay_bounded_over_many_epochs(spark: SparkSession) -> None:
    """Finding 8 of the data-loss review: each run inherited the size estimate of the
    join that computed it (a product), so the estimate's digits doubled every epoch
    and planning became exponentially slow after ~25 epochs. Every run, and an epoch's
    lookup plan, must be estimated from the current runs only."""
    state = KeyedState(spark, ["k"], SCHEMA, compact_every=4)
    batch = spark.range(20).selectExpr("id AS k")
    for epoch in range(1, 41):
        merged = state.with_stored(state.partitioned(batch)).selectExpr("k", "coalesce(v, 0) + 1 AS v")
        state.apply(merged, None, epoch, partitioned=True)
        assert max(_estimated_bits(run) for run in state._runs()) <= 64, f"epoch {epoch}"
    lookup = state.with_stored(state.partitioned(batch))
    assert _estimated_bits(lookup) <= 64 * (len(state._runs()) + 2)
    assert live(state) == {k: 40 for k in range(20)}
