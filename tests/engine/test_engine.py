"""The engine in-process: recovery choices per policy, fencing, garbage collection,
corrupt files, configuration errors. (Crash tests with SIGKILL are in
test_clickstream_recovery.py.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

from falkirk.demo.clickstream import build_pipeline
from falkirk.execution.epoch import EpochRunner
from falkirk.graph import (
    EagerCheckpoint,
    FullHistory,
    GraphError,
    LazyCheckpoint,
    LogOutputs,
    Pipeline,
)
from falkirk.io import FileSource, MemorySink, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.spark.blocks import checkpointed_rdds, lost_blocks
from falkirk.storage import (
    CorruptStorageError,
    MetaStore,
    RootLock,
    StorageError,
    StorageInUseError,
)
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from falkirk.testing.verify import differences
from falkirk.time.ticks import Tick


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("clicks")
    write_input(directory, files=5, sessions_per_file=20, users=8, seed=3)
    return directory


def assert_whole_output(spark, work: Path, clicks: Path) -> None:  # type: ignore[no-untyped-def]
    """Every row of the output and dead-letter tables equals a batch job's."""
    assert differences(pd.read_parquet(work / "out"), batch_output(spark, str(clicks)), name="output") == []
    assert differences(pd.read_parquet(work / "rej"), batch_rejected(spark, str(clicks)), name="rejected") == []


def pipeline(clicks: Path, work: Path, sessions=None, stats=None) -> Pipeline:  # type: ignore[no-untyped-def]
    return build_pipeline(str(clicks), str(work / "out"), str(work / "rej"), sessions_policy=sessions, stats_policy=stats)


def test_restart_recovers_what_each_policy_persisted(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark)
    assert first.run(max_epochs=3).epochs == [1, 2, 3]
    second = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark)
    report = second.run()
    assert report.recovered is not None
    # sessions checkpointed eagerly (epoch 3); user_stats lazily (epoch 2); the exchange
    # between them discards its output so it follows user_stats; the sink was fed
    # from user_stats and rolls back with it; sessions re-sends its logged epoch 3.
    assert report.recovered["sessions"] == 3
    assert report.recovered["user_stats"] == 2 and report.recovered["by_user"] == 2
    assert report.recovered["output"] == 2
    assert report.resent == {"sessions.out>by_user": [3]}
    assert "receiver user_stats rolls back to ↓{2}" in report.recovery_reasons["by_user"]
    assert report.epochs == [3, 4, 5]
    assert_whole_output(spark, tmp_path, clicks)


def test_full_history_replays_its_inputs(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Engine(pipeline(clicks, tmp_path, FullHistory(), EagerCheckpoint()), tmp_path / "state", spark=spark).run(max_epochs=2)
    report = Engine(pipeline(clicks, tmp_path, FullHistory(), EagerCheckpoint()), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None and report.recovered["sessions"] == 2
    assert len(MetaStore(tmp_path / "state").logs("sessions.in0")) == 5  # the history is kept
    assert_whole_output(spark, tmp_path, clicks)


def test_garbage_is_collected_below_the_low_watermarks(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(compact_every=2), LazyCheckpoint(every=2, compact_every=1)), tmp_path / "state", spark=spark)
    report = engine.run()
    store = MetaStore(tmp_path / "state")
    assert report.collected_files > 0
    # sessions' log is needed only above user_stats' checkpoint (epoch 4).
    assert sorted(store.logs("sessions.out")) == [Tick(5)]
    assert [t for t, _, _ in store.state_files("user_stats")] == [Tick(4)]
    on_disk = {str(p) for p in (tmp_path / "state").rglob("part-*.parquet")}
    assert on_disk == {f for f in store.referenced_files() if f.startswith(str(tmp_path / "state"))}


def test_damaged_checkpoint_is_detected(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Engine(pipeline(clicks, tmp_path), tmp_path / "state", spark=spark).run(max_epochs=2)
    state_file = next((tmp_path / "state" / "checkpoints" / "sessions").rglob("part-*.parquet"))
    state_file.write_bytes(state_file.read_bytes()[:-10])
    with pytest.raises(CorruptStorageError, match="truncated"):
        Engine(pipeline(clicks, tmp_path), tmp_path / "state", spark=spark).run()


def test_second_driver_is_refused(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with RootLock(tmp_path / "state"), pytest.raises(StorageInUseError, match="in use by pid"):
        Engine(pipeline(clicks, tmp_path), tmp_path / "state", spark=spark).run()


def small(tmp_path: Path, build) -> Pipeline:  # type: ignore[no-untyped-def]
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / "a.json").write_text('{"k": "x", "v": 1}\n{"k": "y", "v": 2}\n{"k": "x", "v": 5}\n')
    p = Pipeline("small")
    build(p.source("src", FileSource(str(tmp_path / "in"), "json", "k string, v long")))
    return p


def test_aggregates_and_memory_sink(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sink = MemorySink()
    aggs = {f: (f, "v") for f in ("sum", "min", "max", "avg", "first", "last")} | {"n": ("count", None)}
    p = small(tmp_path, lambda s: s.aggregate("agg", "k", aggs, policy=LogOutputs()).sink("mem", sink))
    Engine(p, tmp_path / "state", spark=spark).run()
    rows = {r["k"]: r for r in sink.epochs[1]}
    assert rows["x"]["sum"] == 6 and rows["x"]["min"] == 1 and rows["x"]["max"] == 5
    assert rows["x"]["avg"] == 3.0 and rows["x"]["n"] == 2 and rows["y"]["n"] == 1


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.map("m", lambda df: df.select("nope")).sink("o", MemorySink()), "processor 'm'"),
        (lambda s: [x.sink(f"o{i}", MemorySink()) for i, x in enumerate(s.validate("v", lambda df: df))], "must add a string column 'reason'"),
        (lambda s: s.aggregate("a", "missing", {"n": ("count", None)}).sink("o", MemorySink()), r"\['missing'\]"),
        (lambda s: s.map("m", lambda df: df), "goes nowhere"),
    ],
)
def test_configuration_errors_name_the_processor(spark, tmp_path: Path, build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphError, match=message):
        Engine(small(tmp_path, build), tmp_path / "state", spark=spark).run()


def test_policy_must_fit_the_processor() -> None:
    p = Pipeline("x")
    src = p.source("src", FileSource("/nonexistent", "json", "k string"))
    with pytest.raises(GraphError, match="cannot use LazyCheckpoint"):
        src.map("m", lambda df: df, policy=LazyCheckpoint())


def test_parquet_table_is_readable_before_the_first_epoch(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sink = ParquetTableSink(str(tmp_path / "out"))
    sink.prepare(spark.range(0).withColumn("x", F.lit("a")))
    assert pd.read_parquet(tmp_path / "out").empty


@pytest.mark.parametrize(
    ("stats", "fail", "expected"),
    [
        # user_stats (lazy, checkpoint at 2) fails after epoch 3: it restores epoch 2;
        # the exchange before it discards its output, so it re-executes epoch 3 from
        # sessions' log; the sink consumed user_stats' epoch 3 and rewrites it;
        # sessions and everything upstream keep their live state (⊤).
        (LazyCheckpoint(every=2), "user_stats", {"user_stats": 2, "by_user": 2, "output": 2}),
        # An eager user_stats restores its epoch-3 checkpoint: nothing goes back.
        (EagerCheckpoint(), "user_stats", {}),
        # A full-history user_stats replays its logged inputs up to epoch 3.
        (FullHistory(), "user_stats", {}),
        # sessions fails (eager): it restores its epoch-3 checkpoint; user_stats keeps ⊤.
        (LazyCheckpoint(every=2), "sessions", {}),
    ],
    ids=["lazy", "eager", "history", "upstream-eager"],
)
def test_partial_failure_rolls_back_only_what_it_must(spark, clicks: Path, tmp_path: Path, stats, fail: str, expected: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
    # One epoch in flight, so the failure happens right after epoch 3.
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), stats), tmp_path / "state", spark=spark, max_in_flight=1)

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if epoch == 3 and not report.partial:  # once: epoch 3 may run again after the rollback
            engine.fail(fail)

    engine.on_epoch = on_epoch
    report = engine.run()
    (failed, at, chosen) = report.partial[0]
    assert failed == {fail} and at == 3
    assert {p: e for p, e in chosen.items() if e is not None and e < 3} == expected
    if fail not in expected:
        assert chosen[fail] == 3  # restored from its own persisted state, no further back
    survivor = "sessions" if fail == "user_stats" else "user_stats"
    assert chosen[survivor] is None  # the stateful survivor kept its live state (⊤)
    # Epoch 3 is run again only when something went back below it (the source is not
    # re-read otherwise).
    assert report.epochs == [1, 2, 3] + ([3] if expected else []) + [4, 5]
    assert_whole_output(spark, tmp_path, clicks)


def test_a_second_failure_leaves_survivors_that_are_ahead_where_they_stand(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Adversarial review: user_stats (lazy, checkpoint at 3) fails after epoch 5 and
    re-runs 4 and 5 while sessions, which kept ⊤, stands at 5 and skips them. A second
    failure after the re-run of epoch 4 rolled every survivor back to 4, so sessions
    ran epoch 5 again and wrote its committed log a second time. Survivors now offer
    their live state as of their own frontier."""
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=3)), tmp_path / "state", spark=spark, max_in_flight=1)

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if (epoch, len(report.partial)) in ((5, 0), (4, 1)):
            engine.fail("user_stats")

    engine.on_epoch = on_epoch
    report = engine.run()
    assert [(set(f), at) for f, at, _ in report.partial] == [({"user_stats"}, 5), ({"user_stats"}, 4)]
    assert report.partial[1][2]["sessions"] is None  # ⊤: it keeps epoch 5
    assert report.partial[1][2]["user_stats"] == 3
    assert report.epochs == [1, 2, 3, 4, 5, 4, 4, 5]
    assert_whole_output(spark, tmp_path, clicks)


@pytest.mark.parametrize(
    ("lose", "failed", "survivor"),
    [
        # sessions' blocks go: its step fails first, before user_stats' began, so
        # user_stats (blocks intact, untouched) keeps its live state (⊤).
        ("sessions", {"sessions"}, "user_stats"),
        # user_stats' blocks go: sessions had run its step of the discarded epoch 4
        # (its state moved past the commit) but lost nothing: it takes epoch 4's
        # delta back in memory and survives (⊤).
        ("user_stats", {"user_stats"}, "sessions"),
        # both lose blocks: user_stats had not begun epoch 4, but its state is not
        # whole, so it is failed at once (not found lost by the next epoch).
        ("sessions,user_stats", {"sessions", "user_stats"}, None),
    ],
)
def test_lost_state_blocks_fail_only_what_lost_or_moved(spark, clicks: Path, tmp_path: Path, lose: str, failed: set[str], survivor: str | None) -> None:  # type: ignore[no-untyped-def]
    """The blocks of one processor's state disappear from the executors after epoch 3
    (as when the executor holding them dies); epoch 4 meets the loss. The engine
    asks Spark which state lost blocks and hands only those processors to the solver
    as failed (section 4.4); a whole state that had moved into the discarded epoch is
    taken back in memory. All in the same driver, with the exact output."""
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark, max_in_flight=1)

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if epoch == 3 and not report.executor_losses:
            held = [df for name in lose.split(",") for df in engine.state.operators[name].held() or []]
            assert held and not lost_blocks(spark, held)
            for df in held:
                for rdd in checkpointed_rdds(df):
                    rdd.unpersist(True)  # the block manager master forgets them, as on a loss
            assert lost_blocks(spark, held)

    engine.on_epoch = on_epoch
    report = engine.run()
    assert report.executor_losses == [4]
    (handed, at, chosen) = report.partial[0]
    assert set(handed) == failed and at == 3
    if survivor is not None:
        assert chosen[survivor] is None  # kept its live state
    assert report.epochs[:3] == [1, 2, 3] and report.epochs[-1] == 5
    assert_whole_output(spark, tmp_path, clicks)


def test_a_loss_while_rerunning_leaves_a_survivor_ahead_with_its_committed_epochs(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Review: user_stats (lazy, checkpoint at 4) fails after epoch 6 and re-runs 5
    and 6 while sessions, a survivor, stands at 6. user_stats' blocks are then lost
    during the re-run of epoch 6, with epoch 7 in flight: sessions (whole) takes back
    in memory only what is past its own frontier, 6, never its committed epoch 6
    (reverting to the failed epoch's predecessor, 5, lost epoch 6 of sessions' state
    for good)."""
    clicks = tmp_path / "in"  # sessions span files: a lost epoch of sessions' state shows later
    write_input(clicks, files=9, sessions_per_file=20, users=6, seed=5)
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=4)), tmp_path / "state", spark=spark, max_in_flight=2)
    rerun_5_committed = threading.Event()

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if epoch == 5 and not report.partial:
            engine.fail("user_stats")  # takes effect once nothing is in flight: after 6
        elif epoch == 5 and len(report.partial) == 1 and not report.executor_losses:
            rerun_5_committed.set()  # epoch 7 is planned only after this returns

    compute = EpochRunner.compute

    def lose_blocks_before_rerun_of_6(runner: EpochRunner, work) -> None:  # type: ignore[no-untyped-def]
        # The blocks go when the re-run of 6 starts computing (after 5 committed), not
        # when on_epoch(5) runs: by then 6 may have computed already (a race CI lost).
        if work.epoch == 6 and len(engine.report.partial) == 1 and not engine.report.executor_losses:
            assert rerun_5_committed.wait(120)
            for df in engine.state.operators["user_stats"].held() or []:
                for rdd in checkpointed_rdds(df):
                    rdd.unpersist(True)
        compute(runner, work)

    monkeypatch.setattr(EpochRunner, "compute", lose_blocks_before_rerun_of_6)
    engine.on_epoch = on_epoch
    report = engine.run()
    assert report.partial[0][:2] == ({"user_stats"}, 6) and report.partial[0][2]["user_stats"] == 4
    assert report.executor_losses == [6], (report.epochs, report.partial)
    assert report.partial[1][0] == {"user_stats"} and report.partial[1][2]["sessions"] is None
    assert_whole_output(spark, tmp_path, clicks)


def test_parquet_file_source(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in").mkdir()
    pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]}).to_parquet(tmp_path / "in" / "p1.parquet")
    pd.DataFrame({"k": ["b"], "v": [10]}).to_parquet(tmp_path / "in" / "p2.parquet")
    sink = MemorySink()
    p = Pipeline("pq")
    src = p.source("src", FileSource(str(tmp_path / "in"), "parquet", "k string, v long"))
    src.aggregate("agg", "k", {"total": ("sum", "v")}, policy=EagerCheckpoint()).sink("mem", sink)
    assert Engine(p, tmp_path / "state", spark=spark).run().epochs == [1, 2]
    assert sorted((r["k"], r["total"]) for r in sink.epochs[1]) == [("a", 4), ("b", 2)]
    assert [(r["k"], r["total"]) for r in sink.epochs[2]] == [("b", 12)]


def test_sink_staging_leftovers_are_removed(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    leftover = tmp_path / "out" / "_staging-e3-abc"
    leftover.mkdir(parents=True)
    (leftover / "part-0.parquet").write_bytes(b"partial")
    ParquetTableSink(str(tmp_path / "out")).prepare(spark.range(0))
    assert not list((tmp_path / "out").glob("_staging*"))
    assert pd.read_parquet(tmp_path / "out").empty


def test_partial_failure_with_epochs_in_flight(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # With two epochs in flight a failure takes effect once the epochs in flight have
    # committed: after epoch 3 or 4; the result is exact either way.
    engine = Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark, max_in_flight=2)

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if epoch == 3 and not report.partial:
            engine.fail("user_stats")

    engine.on_epoch = on_epoch
    report = engine.run()
    failed, at, chosen = report.partial[0]
    assert failed == {"user_stats"} and at in (3, 4)
    assert chosen["sessions"] is None and chosen["user_stats"] is not None
    assert_whole_output(spark, tmp_path, clicks)


def test_epochs_in_flight_give_the_same_result(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    engine = Engine(
        pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)),
        tmp_path / "state",
        spark=spark,
        max_in_flight=3,
        on_epoch=lambda e, _s, r: seen.append(r.in_flight),
    )
    report = engine.run()
    assert report.epochs == [1, 2, 3, 4, 5]
    assert max(seen) > 1  # epochs did overlap
    assert {"sessions", "user_stats"} <= report.step_finished.keys()
    for name, finished in report.step_finished.items():  # a keyed step applies epochs in order
        assert len(finished) == len(report.step_seconds[name]) == 5
        if name in ("sessions", "user_stats"):
            assert finished == sorted(finished), name
    assert_whole_output(spark, tmp_path, clicks)


def test_idle_timeout_keeps_waiting_for_new_files(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import threading
    import time

    (tmp_path / "in").mkdir()
    pd.DataFrame({"k": ["a"], "v": [1]}).to_parquet(tmp_path / "in" / "p1.parquet")
    sink = MemorySink()
    p = Pipeline("svc")
    src = p.source("src", FileSource(str(tmp_path / "in"), "parquet", "k string, v long"))
    src.aggregate("agg", "k", {"total": ("sum", "v")}).sink("mem", sink)
    engine = Engine(p, tmp_path / "state", spark=spark)
    runner = threading.Thread(target=lambda: engine.run(idle_timeout=6.0, poll_interval=0.05))
    runner.start()
    deadline = time.monotonic() + 60
    while 1 not in sink.epochs and time.monotonic() < deadline:
        time.sleep(0.05)
    pd.DataFrame({"k": ["a"], "v": [5]}).to_parquet(tmp_path / "in" / ".p2.tmp")  # dot files are ignored
    (tmp_path / "in" / ".p2.tmp").rename(tmp_path / "in" / "p2.parquet")  # arrives atomically
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert engine.report.epochs == [1, 2]
    assert sink.epochs[2] == [{"k": "a", "total": 6}]
    with pytest.raises(GraphError, match="idle_timeout"):
        Engine(p, tmp_path / "state2", spark=spark).run(idle_timeout=-1)


def test_vectorized_stateful_equals_per_key(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    per_key = build_pipeline(str(clicks), str(tmp_path / "a" / "out"), str(tmp_path / "a" / "rej"))
    vectorized = build_pipeline(str(clicks), str(tmp_path / "b" / "out"), str(tmp_path / "b" / "rej"), vectorized=True)
    Engine(per_key, tmp_path / "a" / "state", spark=spark).run()
    Engine(vectorized, tmp_path / "b" / "state", spark=spark).run()
    a = pd.read_parquet(tmp_path / "a" / "out").sort_values(["epoch", "user_id"]).reset_index(drop=True)
    b = pd.read_parquet(tmp_path / "b" / "out").sort_values(["epoch", "user_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert_whole_output(spark, tmp_path / "b", clicks)


def test_vectorized_state_must_keep_its_key_columns(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in").mkdir()
    pd.DataFrame({"k": ["a", "b"]}).to_parquet(tmp_path / "in" / "p1.parquet")
    p = Pipeline("v")
    src = p.source("src", FileSource(str(tmp_path / "in"), "parquet", "k string"))
    src.stateful(
        "bad", "k", lambda rows, state: (None, pd.DataFrame({"n": [1]})), state_schema="n long",
        output_schema="k string", vectorized=True,
    ).sink("mem", MemorySink())
    with pytest.raises(Exception, match="new state must have columns"):
        Engine(p, tmp_path / "state", spark=spark).run()
    with pytest.raises(GraphError, match="on_epoch_end needs the per-key form"):
        src.stateful("x", "k", lambda r, s: (None, None), state_schema="n long", output_schema="k string",
                     vectorized=True, on_epoch_end=lambda k, s, e: (None, None))


def test_a_copied_root_runs_on_its_own_and_leaves_the_original_alone(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Review: metadata held absolute paths, so a run on a copy of a root read the
    # original's files and its garbage collection deleted them.
    import shutil

    Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark).run(max_epochs=3)
    shutil.copytree(tmp_path / "state", tmp_path / "copy")
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "state").rglob("*.parquet")}
    copy_out = tmp_path / "copy-work"
    shutil.copytree(tmp_path / "out", copy_out / "out")
    shutil.copytree(tmp_path / "rej", copy_out / "rej")
    Engine(pipeline(clicks, copy_out, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "copy", spark=spark).run()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "state").rglob("*.parquet")} == before
    assert_whole_output(spark, copy_out, clicks)
    Engine(pipeline(clicks, tmp_path, EagerCheckpoint(), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark).run()
    assert_whole_output(spark, tmp_path, clicks)


def test_a_root_is_refused_under_its_other_spelling(spark, clicks: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Engine(pipeline(clicks, tmp_path), tmp_path / "state", spark=spark).run(max_epochs=1)
    with pytest.raises(StorageError, match="was used as a local path and is now given as a file: URI"):
        Engine(pipeline(clicks, tmp_path), f"file://{tmp_path / 'state'}", spark=spark, metadata_dir=tmp_path / "m").run()
