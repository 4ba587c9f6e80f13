"""Generator sources: deterministic batches, and files identical to what they generate."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.clickstream import CSV_OPTIONS, RAW_SCHEMA, check_rows
from falkirk.graph import GraphError
from falkirk.io import clickstream_generator, keyed_generator


def rows(df: pd.DataFrame) -> pd.DataFrame:
    return df.fillna("").sort_values(list(df.columns)).reset_index(drop=True)


def _all(spark: SparkSession, gen, batches: int):  # type: ignore[no-untyped-def]
    out = gen.batch(spark, 0)
    for b in range(1, batches):
        out = out.unionByName(gen.batch(spark, b))
    return out


def test_a_batch_is_the_same_every_time_and_batches_differ(spark: SparkSession) -> None:
    gen = clickstream_generator(batches=3, sessions_per_batch=30, users=5, seed=1)
    first = gen.batch(spark, 1).toPandas()
    pd.testing.assert_frame_equal(rows(first), rows(gen.batch(spark, 1).toPandas()))
    assert not rows(first).equals(rows(gen.batch(spark, 2).toPandas()))
    other_seed = clickstream_generator(batches=3, sessions_per_batch=30, users=5, seed=2)
    assert not rows(first).equals(rows(other_seed.batch(spark, 1).toPandas()))


def test_offsets_walk_the_batches_then_stop() -> None:
    gen = keyed_generator(batches=2, rows_per_batch=10, keys=4)
    assert gen.next_offsets(None) == {"batch": 0}
    assert gen.next_offsets({"batch": 0}) == {"batch": 1}
    assert gen.next_offsets({"batch": 1}) is None
    with pytest.raises(GraphError, match="batches"):
        keyed_generator(batches=0, rows_per_batch=10, keys=4)


def test_sessions_are_whole_across_batches(spark: SparkSession) -> None:
    gen = clickstream_generator(batches=6, sessions_per_batch=40, users=7, seed=5, bad_fraction=0.0)
    events = _all(spark, gen, 6).toPandas()
    per_session = events.groupby("sess_id")["event"].agg(list)
    # sessions started in the first 4 batches have ended by batch 5 (span <= 2)
    early = [s for s in per_session.index if int(s[1:]) < 4 * 40]
    assert len(early) == 160
    for s in early:
        kinds = per_session[s]
        assert kinds.count("start") == 1 and kinds.count("end") == 1 and len(kinds) <= 5


def test_csv_files_hold_exactly_the_generated_rows(spark: SparkSession, tmp_path: Path) -> None:
    gen = clickstream_generator(batches=3, sessions_per_batch=30, users=5, seed=4, bad_fraction=0.1)
    paths = gen.write_files(spark, str(tmp_path / "csv"), format="csv")
    assert [Path(p).name for p in paths] == [f"batch-0000000{b}.csv" for b in range(3)]
    assert not [p for p in (tmp_path / "csv").iterdir() if p.name.startswith("_")]
    back = spark.read.schema(RAW_SCHEMA).options(**CSV_OPTIONS).csv(str(tmp_path / "csv"))
    generated = _all(spark, gen, 3)
    keep = ["sess_id", "user_id", "ts", "event", "reason"]
    pd.testing.assert_frame_equal(
        rows(check_rows(back).select(*keep).toPandas()), rows(check_rows(generated).select(*keep).toPandas())
    )
    assert check_rows(generated).filter("reason is not null").count() > 0


def test_keyed_parquet_files(spark: SparkSession, tmp_path: Path) -> None:
    gen = keyed_generator(batches=2, rows_per_batch=500, keys=50, seed=9)
    gen.write_files(spark, str(tmp_path / "pq"))
    back = pd.read_parquet(tmp_path / "pq")
    assert len(back) == 1000 and back["key"].between(0, 49).all() and back["value"].between(0, 999).all()
    assert back["key"].nunique() == 50
