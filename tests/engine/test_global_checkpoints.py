"""Global barrier checkpoints (Wallaroo / Carbone et al.'s ABS) in the epoch engine:
only barriers are rollback points, every processor's Ξ at a barrier commits in one
transaction, the solver picks exactly the last committed barrier, and the clickstream
example with ``--global-checkpoints K``, killed at every barrier step and at random
moments, produces exactly the batch job's whole output."""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.clickstream import build_pipeline
from falkirk.graph import EagerCheckpoint, GlobalCheckpoints, GraphError, Pipeline
from falkirk.io import FileSource, MemorySink, ParquetTableSink, keyed_generator
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from tests.engine.test_clickstream_recovery import check, finish

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"
EVERY = 2


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("clicks")
    write_input(directory, files=7, sessions_per_file=25, users=10, seed=17, bad_fraction=0.05)
    return directory


@pytest.fixture(scope="module")
def expected(spark: SparkSession, clicks: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return batch_output(spark, str(clicks)), batch_rejected(spark, str(clicks))


def start(clicks: Path, work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    args = ["--input", str(clicks), "--output", str(work / "out"), "--storage", str(work / "state"),
            "--rejected", str(work / "rej"), "--global-checkpoints", str(EVERY), "-v"]
    return subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_here(spark: SparkSession, clicks: Path, work: Path, caplog: pytest.LogCaptureFixture) -> bytes:
    """What ``start`` runs, in this process (no second JVM start), to the end; its
    INFO log, as the example's ``-v`` prints it."""
    pipeline = build_pipeline(str(clicks), str(work / "out"), str(work / "rej"), checkpoints=GlobalCheckpoints(every=EVERY))
    with caplog.at_level(logging.INFO, logger="falkirk"):
        Engine(pipeline, work / "state", spark=spark).run()
    return "\n".join(r.getMessage() for r in caplog.records).encode()


def recovered(stderr: bytes) -> dict[str, int]:
    """The epoch each processor recovered to, from the restart's INFO log."""
    return {m.group(1).decode(): int(m.group(2)) for m in re.finditer(rb"recovery processor=(\w+) epoch=(\d+)", stderr)}


#: (crash point, occurrence, the barrier every processor must come back to). A kill
#: just before a barrier commits comes back to the barrier before it, as at
#: snapshot.written; a sink written after a barrier committed comes back to it, as at
#: commit.after (each case is a driver start on CI's clock).
CASES = [
    ("barrier.injected", 2, 2),  # epoch 4's barrier decided (epoch 2's committed): back to 2
    ("snapshot.written", 3, 2),  # epoch 4's first snapshot written (two keyed processors), not committed
    ("commit.after", 5, 4),  # epoch 5 committed: no barrier, back to 4
    ("sink.release", 3, 4),  # barrier 4 committed, its output not yet released
    ("source.ack", 2, 4),  # barrier 4 committed, its input not yet acknowledged
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "occurrence", "barrier"), CASES)
def test_kill_at_each_barrier_step_returns_every_processor_to_the_last_barrier(  # type: ignore[no-untyped-def]
    spark, caplog, point: str, occurrence: int, barrier: int | None, clicks: Path, expected: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path
) -> None:
    assert finish(start(clicks, tmp_path, crash=f"{point}:{occurrence}")) == -signal.SIGKILL
    err = run_here(spark, clicks, tmp_path, caplog)
    back = recovered(err)
    assert len(set(back.values())) == 1, f"a global rollback puts every processor at one barrier: {back}"
    (epoch,) = set(back.values())
    assert epoch % EVERY == 0 and (barrier is None or epoch == barrier), back
    assert b"global checkpoint committed epoch=7" in err  # the clean stop's final barrier
    check(tmp_path, clicks, expected)


@pytest.mark.slow
def test_repeated_kills_at_random_moments(spark, caplog, clicks: Path, expected: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    for _ in range(2):
        proc = start(clicks, tmp_path)
        time.sleep(rng.uniform(5, 14))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=600)
    run_here(spark, clicks, tmp_path, caplog)
    check(tmp_path, clicks, expected)


def test_only_barriers_commit_checkpoint_records(spark: SparkSession, tmp_path: Path) -> None:
    p = Pipeline("g", checkpoints=GlobalCheckpoints(every=3))
    (
        p.source("src", keyed_generator(batches=7, rows_per_batch=50, keys=5, seed=1))
        .aggregate("agg", "key", {"n": ("count", None)})
        .sink("out", MemorySink())
    )
    engine = Engine(p, str(tmp_path / "state"), spark=spark)
    engine.run()
    store = MetaStore(tmp_path / "state")
    try:
        stored = store.checkpoints(engine.topology)
        state_epochs = sorted(t.epoch for t, _, _ in store.state_files("agg"))
    finally:
        store.close()
    # Ξ of every processor at the final barrier (after epoch 7) only: older ones collected
    assert {name: [str(s.meta.frontier) for s in ss] for name, ss in stored.items()} == {
        name: ["↓{7}"] for name in p.processors
    }
    # state written at the barriers after epochs 3 and 6 and at the final one, never between
    assert state_epochs == [3, 6, 7]
    assert [(e, kind) for name, e, kind in engine.report.checkpoints if name == "agg"] == [(3, "base"), (6, "delta"), (7, "delta")]


def test_policies_and_global_checkpoints_do_not_mix() -> None:
    p = Pipeline("g", checkpoints=GlobalCheckpoints(every=2))
    src = p.source("src", FileSource("/tmp", "csv", "x int"))
    with pytest.raises(GraphError, match="global checkpoints, which decide"):
        src.aggregate("agg", "x", {"n": ("count", None)}, policy=EagerCheckpoint())
    with pytest.raises(GraphError, match="exactly one of"):
        GlobalCheckpoints()
    with pytest.raises(GraphError, match="exactly one of"):
        GlobalCheckpoints(every=2, seconds=1.0)


def test_alignment_holds_fast_input_back_and_drops_nothing(spark: SparkSession, tmp_path: Path) -> None:
    """Two sources at different rates (b twice a's rows per epoch, then exhausted)
    into a join, under global checkpoints: the join's snapshot at each barrier holds
    every row of both sides up to the barrier and none after it; after a failure
    and the global rollback, the whole output equals an uninterrupted run's and a
    plain-Python join's."""
    import itertools

    rng = random.Random(8)
    a = [[(f"k{rng.randrange(6)}", 100 * e + i) for i in range(3)] for e in range(6)]
    b = [[(f"k{rng.randrange(6)}", 1000 * f + i) for i in range(3)] for f in range(8)]  # 2 files per epoch
    for name, files, column in (("a", a, "v"), ("b", b, "w")):
        (tmp_path / name).mkdir()
        for n, rows in enumerate(files):
            pd.DataFrame(rows, columns=["k", column]).to_parquet(tmp_path / name / f"{n:03d}.parquet")

    def pipeline(work: Path) -> Pipeline:
        p = Pipeline("aligned", checkpoints=GlobalCheckpoints(every=2, compact_every=100))
        left = p.source("a", FileSource(str(tmp_path / "a"), "parquet", "k string, v long"))
        right = p.source("b", FileSource(str(tmp_path / "b"), "parquet", "k string, w long", files_per_epoch=2))
        left.join("match", right, "k").sink("out", ParquetTableSink(str(work / "out")))
        return p

    failed: list[int] = []
    work = tmp_path / "run"

    def fail_once(epoch: int, _: float, __: object) -> None:
        if epoch == 5 and not failed:
            failed.append(epoch)
            engine.fail("match")

    # one epoch at a time: the failure after epoch 5 takes effect right after it
    engine = Engine(pipeline(work), str(work / "state"), spark=spark, on_epoch=fail_once, max_in_flight=1)
    report = engine.run()
    assert failed and report.partial and set(report.partial[0][2].values()) == {4}  # every processor back to barrier 4
    # each barrier's snapshot of the join: rows of both sides up to it, none after it
    store = MetaStore(work / "state")
    try:
        chain = store.state_files("match")
    finally:
        store.close()
    files = {t.epoch: [f.path for f in fs] for t, _, fs in chain}
    assert sorted(files) == [2, 4, 6]
    arrived = {"a": {e + 1: len(rows) for e, rows in enumerate(a)}, "b": {}}
    for f, rows in enumerate(b):
        arrived["b"][f // 2 + 1] = arrived["b"].get(f // 2 + 1, 0) + len(rows)
    for barrier in (2, 4, 6):
        snapshot = pd.concat([pd.read_parquet(path) for t in sorted(files) if t <= barrier for path in files[t]])
        for side, letter in (("a", "l"), ("b", "r")):
            got = snapshot[snapshot["_side"] == letter]["_a"]
            assert got.max() <= barrier, f"rows after barrier {barrier} in its snapshot"
            want = sum(n for e, n in arrived[side].items() if e <= barrier)
            assert len(got) == want, f"{side}: {len(got)} rows in the snapshot at {barrier}, {want} arrived"
    got = pd.read_parquet(work / "out")
    reference = Engine(pipeline(tmp_path / "ref"), str(tmp_path / "ref" / "state"), spark=spark)
    reference.run()
    want = pd.read_parquet(tmp_path / "ref" / "out")
    plain = [
        (k, v, w, max(ea, eb))
        for (ea, ra), (eb, rb) in itertools.product(
            [(e + 1, r) for e, rows in enumerate(a) for r in rows], [(f // 2 + 1, r) for f, rows in enumerate(b) for r in rows]
        )
        for (k, v), (k2, w) in [(ra, rb)]
        if k == k2
    ]
    assert sorted(got.itertuples(index=False, name=None)) == sorted(want.itertuples(index=False, name=None)) == sorted(plain)


def test_a_barrier_every_few_seconds(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GlobalCheckpoints(seconds=S): a barrier after the first epoch planned S seconds
    after the previous barrier's, and nothing else is checkpointed. The barrier clock's
    time is replaced by one that moves 1 s per reading and stands still on request."""
    import types

    import falkirk.control.barriers as barriers_module

    clock = {"now": 0.0, "step": 1.0}

    def monotonic() -> float:
        clock["now"] += clock["step"]
        return clock["now"]

    fake = types.SimpleNamespace(monotonic=monotonic, perf_counter=time.perf_counter, sleep=time.sleep)
    monkeypatch.setattr(barriers_module, "time", fake)
    def checkpoints_of_agg(name: str) -> list[tuple[int, str]]:
        p = Pipeline(name, checkpoints=GlobalCheckpoints(seconds=0.5, compact_every=100))
        (
            p.source("src", keyed_generator(batches=3, rows_per_batch=20, keys=4, seed=2))
            .aggregate("agg", "key", {"n": ("count", None)})
            .sink("out", MemorySink())
        )
        engine = Engine(p, str(tmp_path / name), spark=spark)
        engine.run()
        return [(e, kind) for processor, e, kind in engine.report.checkpoints if processor == "agg"]

    assert checkpoints_of_agg("timed") == [(1, "base"), (2, "delta"), (3, "delta")]

    clock["step"] = 0.0  # time stands still: no barrier is ever due; the clean stop takes one
    assert checkpoints_of_agg("still") == [(3, "base")]
