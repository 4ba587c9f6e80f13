"""ParquetTableSink's three visibilities: ``committed`` (the default) shows an epoch
once its metadata commit is durable, ``released`` only once the monitor releases it
(never a file a rollback deletes or rewrites: the table is a prefix of epochs), and
``written`` as soon as it is written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import EagerCheckpoint, GraphError, LazyCheckpoint, Pipeline
from falkirk.io import ParquetTableSink, keyed_generator
from falkirk.io.table_check import verify_table
from falkirk.runtime import Engine
from falkirk.storage.filesystem import filesystem_for


def epochs_in(table: Path) -> list[int]:
    return sorted(int(p.name[6:16]) for p in table.glob("epoch-*.parquet"))


def test_released_epochs_appear_in_order_and_aborted_ones_never(spark: SparkSession, tmp_path: Path) -> None:
    sink = ParquetTableSink(str(tmp_path / "t"), visibility="released")
    df = spark.createDataFrame([(1,)], "x long")
    sink.prepare(df.limit(0))
    for e in (1, 2, 3):
        assert sink.pre_commit(df, e) == []
    assert epochs_in(tmp_path / "t") == [0]  # the empty epoch 0 that makes the table readable
    sink.commit_upto(1)
    assert epochs_in(tmp_path / "t") == [0, 1]
    # a crash in the middle of a release: the checksum moved, the file not yet
    pending = tmp_path / "t" / "_pending"
    (pending / ".epoch-0000000002.parquet.sha256").rename(tmp_path / "t" / ".epoch-0000000002.parquet.sha256")
    sink.abort_after(2)
    sink.commit_upto(2)
    sink.commit_upto(2)
    assert epochs_in(tmp_path / "t") == [0, 1, 2]
    assert sorted(p.name for p in pending.iterdir()) == []
    report = verify_table(*filesystem_for(str(tmp_path / "t"), spark))
    assert (report.checked, report.problems) == (3, [])
    assert pd.read_parquet(tmp_path / "t")["epoch"].tolist() == [1, 2]


def test_committed_visibility_shows_an_epoch_once_published(spark: SparkSession, tmp_path: Path) -> None:
    sink = ParquetTableSink(str(tmp_path / "t"))
    df = spark.createDataFrame([(1,)], "x long")
    sink.prepare(df.limit(0))
    (stored,) = sink.pre_commit(df, 1)
    assert stored.path == str(tmp_path / "t" / "epoch-0000000001.parquet")  # where it will be read
    sink.pre_commit(df, 2)
    assert epochs_in(tmp_path / "t") == [0], "written, not committed: not in the table"
    sink.publish_upto(1)
    sink.publish_upto(1)  # idempotent (a restart repeats it)
    assert epochs_in(tmp_path / "t") == [0, 1]
    assert (tmp_path / "t" / "epoch-0000000001.parquet").stat().st_size == stored.size
    sink.abort_after(1)  # a rollback: epoch 2 was never committed
    sink.publish_upto(2)
    assert epochs_in(tmp_path / "t") == [0, 1]
    assert list((tmp_path / "t" / "_pending").iterdir()) == []


def test_written_visibility_shows_an_epoch_when_written(spark: SparkSession, tmp_path: Path) -> None:
    sink = ParquetTableSink(str(tmp_path / "t"), visibility="written")
    df = spark.createDataFrame([(1,)], "x long")
    sink.prepare(df.limit(0))
    assert len(sink.pre_commit(df, 1)) == 1
    sink.abort_after(0)  # nothing pending in this mode
    assert epochs_in(tmp_path / "t") == [0, 1]


def test_the_default_table_never_shows_an_uncommitted_epoch(spark: SparkSession, tmp_path: Path) -> None:
    """At every commit (and while the next epochs are computed: epochs overlap) the
    table holds exactly the committed epochs."""
    work = tmp_path / "run"
    shown: list[tuple[int, list[int]]] = []

    def watch(epoch: int, _: float, __: object) -> None:
        shown.append((epoch, epochs_in(work / "out")))

    p = Pipeline("visible-committed")
    (
        p.source("src", keyed_generator(batches=5, rows_per_batch=100, keys=10, seed=3))
        .aggregate("agg", "key", {"n": ("count", None)}, policy=LazyCheckpoint(every=2))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    Engine(p, str(work / "state"), spark=spark, on_epoch=watch).run()
    assert shown == [(e, list(range(e + 1))) for e in range(1, 6)]


def test_an_unknown_visibility_is_refused() -> None:
    with pytest.raises(GraphError, match="visibility must be one of"):
        ParquetTableSink("/tmp/x", visibility="eventually")


def pipeline(work: Path, policy: object) -> Pipeline:
    p = Pipeline("visible")
    (
        p.source("src", keyed_generator(batches=6, rows_per_batch=200, keys=20, seed=3))
        .aggregate("agg", "key", {"n": ("count", None), "s": ("sum", "value")}, policy=policy)  # type: ignore[arg-type]
        .sink("out", ParquetTableSink(str(work / "out"), visibility="released"))
    )
    return p


def test_a_released_table_is_always_a_prefix_and_a_failure_rewrites_nothing_seen(spark: SparkSession, tmp_path: Path) -> None:
    """With a lazily checkpointed aggregate above it, an epoch is released only at the
    aggregate's next checkpoint; after the aggregate fails, the epochs it replays were
    never shown. Every file a reader saw stays byte for byte, and the whole output
    equals an uninterrupted run's."""
    reference = tmp_path / "ref"
    Engine(pipeline(reference, EagerCheckpoint()), str(reference / "state"), spark=spark).run()
    want = pd.read_parquet(reference / "out").sort_values(["epoch", "key"]).reset_index(drop=True)
    assert epochs_in(reference / "out") == list(range(7))  # eager: every epoch released at its commit

    work = tmp_path / "run"
    seen: dict[str, bytes] = {}
    prefixes: list[list[int]] = []
    failed: list[int] = []

    def watch(epoch: int, _: float, __: object) -> None:
        shown = epochs_in(work / "out")
        prefixes.append(shown)
        assert shown == list(range(len(shown))), f"not a prefix of epochs: {shown}"
        for f in (work / "out").glob("epoch-*.parquet"):
            data = f.read_bytes()
            assert seen.setdefault(f.name, data) == data, f"{f.name} changed after a reader could see it"
        if epoch == 4 and not failed:
            failed.append(epoch)
            engine.fail("agg")

    engine = Engine(pipeline(work, LazyCheckpoint(every=3)), str(work / "state"), spark=spark, on_epoch=watch)
    engine.run()
    assert any(len(p) - 1 < e for e, p in enumerate(prefixes, start=1)), "lazy checkpoints should delay releases"
    got = pd.read_parquet(work / "out").sort_values(["epoch", "key"]).reset_index(drop=True)
    shown = epochs_in(work / "out")
    assert shown == list(range(len(shown)))
    pd.testing.assert_frame_equal(got, want[want["epoch"] < len(shown)].reset_index(drop=True))


def test_a_replayed_last_epoch_is_published_again(spark: SparkSession, tmp_path: Path) -> None:
    """A failure after the last epoch committed (and was published) rolls the sink
    back and replays that epoch: its new file is moved in too, nothing stays pending."""
    def counting(work: Path) -> Pipeline:
        p = Pipeline("replayed")
        (
            p.source("src", keyed_generator(batches=6, rows_per_batch=100, keys=10, seed=3))
            .aggregate("agg", "key", {"n": ("count", None)}, policy=LazyCheckpoint(every=5))  # replays epoch 6 alone
            .sink("out", ParquetTableSink(str(work / "out")))
        )
        return p

    Engine(counting(tmp_path / "ref"), str(tmp_path / "ref" / "state"), spark=spark).run()
    failed: list[int] = []

    def fail_at_the_end(epoch: int, _: float, __: object) -> None:
        if epoch == 6 and not failed:
            failed.append(epoch)
            engine.fail("agg")

    work = tmp_path / "run"
    engine = Engine(counting(work), str(work / "state"), spark=spark, on_epoch=fail_at_the_end)
    report = engine.run()
    assert failed and report.partial, "the failure rolled back"
    assert list((work / "out" / "_pending").iterdir()) == []
    assert epochs_in(work / "out") == list(range(7))
    got = pd.read_parquet(work / "out").sort_values(["epoch", "key"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, pd.read_parquet(tmp_path / "ref" / "out").sort_values(["epoch", "key"]).reset_index(drop=True))


def test_a_run_on_another_thread_publishes_its_epochs(spark: SparkSession, tmp_path: Path) -> None:
    """The thread that publishes has no active Spark session of its own."""
    import threading

    p = Pipeline("threaded")
    p.source("src", keyed_generator(batches=2, rows_per_batch=10, keys=3, seed=1)).sink("out", ParquetTableSink(str(tmp_path / "out")))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Engine(p, str(tmp_path / "state"), spark=spark).run()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=300)
    assert errors == [] and epochs_in(tmp_path / "out") == [0, 1, 2]
