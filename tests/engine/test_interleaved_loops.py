"""Interleaved loops in the engine: later epochs iterate together with earlier ones,
and selective rollback inside a loop (the paper's Figure 3 - Select -> Sum -> Buffer -
with (epoch, iteration) times, sections 2.3 and 3.3).

Epoch 1 takes 21 iterations and epoch 2 only 3: epoch 2 enters the loop while epoch
1 iterates and is done with its iterations long before. ``buffer``'s checkpoint at
the end of epoch 1 is then taken with epoch 2's sums in its state, and holds none of
them. Killed after epoch 1 commits, the pipeline rolls ``buffer`` back to "all of
epoch 1, none of epoch 2" and runs epoch 2 again: every sum is held once. Every run's
whole output, and everything the buffer holds, is compared with a plain-Python
computation."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.halving import build
from falkirk.execution.epoch import EpochRunner
from falkirk.graph import EagerCheckpoint, GraphError, Pipeline
from falkirk.io import FileSource, MemorySink
from falkirk.runtime import Engine
from falkirk.spark.blocks import cached_partitions, checkpointed_rdds
from falkirk.storage import MetaStore
from falkirk.testing.halving import expected, expected_held, iterations, write
from falkirk.testing.verify import differences
from falkirk.time import INF
from falkirk.time.ticks import Tick

RUNNER = Path(__file__).with_name("interleave_pipeline.py")
EPOCHS = [[2**20, 3 * 2**18, 777], [5, 3], [2**12 + 1, 9], [1, 2], [6]]

pytestmark = pytest.mark.slow


@pytest.fixture()
def numbers(tmp_path: Path) -> Path:
    write(tmp_path / "in", EPOCHS)
    return tmp_path / "in"


def held(engine: Engine) -> pd.DataFrame:
    rows = engine.state.operators["buffer"].rows().toPandas()  # type: ignore[attr-defined]
    return rows[["total", "_time"]].astype("int64")


def output(tmp_path: Path) -> pd.DataFrame:
    return pd.read_parquet(tmp_path / "out")[["total", "epoch"]].astype("int64")


def epoch_of(version: int) -> int:
    """The epoch of a buffer part's version (the ordinal of its (epoch, iteration))."""
    return next(e for e in range(1, len(EPOCHS) + 2) if version <= Tick(e, INF).ordinal)


def test_a_later_epoch_iterates_with_an_earlier_one_and_the_checkpoint_is_selective(spark, numbers: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Also: what the loop sent back with its lineage cut (every 8th iteration) holds
    no block once its epoch has committed."""
    assert [len(iterations(e)) for e in EPOCHS][:3] == [21, 3, 13]
    cut: list[object] = []
    original = EpochRunner.cut

    def recording(self, work, df, replicas=1):  # type: ignore[no-untyped-def]
        cut.append(original(self, work, df, replicas))
        return cut[-1]

    monkeypatch.setattr(EpochRunner, "cut", recording)
    engine = Engine(build(str(numbers), str(tmp_path / "out")), tmp_path / "state", spark=spark, max_in_flight=3)
    report = engine.run(max_epochs=2)  # then the checkpoints are looked at, before compaction forgets them
    assert report.epochs == [1, 2]
    assert report.interleaved == [("halve", 2, [1])]  # epoch 2 entered while epoch 1 iterated
    arrivals = [epoch_of(v) for v in engine.state.operators["buffer"].arrivals]  # type: ignore[attr-defined]
    assert arrivals.count(2) == 3 and arrivals[-1] == 1, arrivals  # epoch 2 was done before epoch 1
    # so epoch 2's sums were in the state when epoch 1's checkpoint was taken (at its end)
    meta = MetaStore(tmp_path / "state", read_only=True)
    chain = {t: files for t, _, files in meta.state_files("buffer")}
    meta.close()
    assert set(chain) == {Tick(1, INF), Tick(2, INF)}
    in_one = pd.read_parquet([f.path for f in chain[Tick(1, INF)]])
    assert sorted(in_one["_time"]) == [Tick(1, i).ordinal for i in range(21)]  # all of epoch 1, nothing of epoch 2
    in_two = pd.read_parquet([f.path for f in chain[Tick(2, INF)]])
    assert sorted(in_two["_time"]) == [Tick(2, i).ordinal for i in range(3)]  # the delta: epoch 2's sums
    report = engine.run()  # the rest, from a restart's recovery
    assert report.recovered_at["buffer"] == (2, INF) and report.epochs == [1, 2, 3, 4, 5]  # one report for both runs
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []
    assert differences(held(engine), expected_held(EPOCHS), name="buffer") == []
    assert len(cut) == 3  # the 8th and 16th of epoch 1's 21 iterations, the 8th of epoch 3's 13
    ids = {int(rdd.id()) for df in cut for rdd in checkpointed_rdds(df)}  # type: ignore[arg-type]
    assert len(ids) == 3 and not ids & set(cached_partitions(spark)), ids  # (DataFrame.unpersist alone leaves them)


def test_killed_with_a_later_epoch_in_the_state_it_rolls_back_to_all_of_one_none_of_the_next(spark, numbers: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Killed after epoch 2's iterations are computed, epoch 1 committed: epoch 2's
    sums (and maybe epoch 3's) are in ``buffer``'s state, but not in its checkpoint."""
    env = {**os.environ, "FALKIRK_CRASH_AT": "loop.computed:2"}
    proc = subprocess.run([sys.executable, str(RUNNER), *_args(numbers, tmp_path)], env=env, capture_output=True, timeout=600)
    log = proc.stderr.decode()
    assert proc.returncode == -signal.SIGKILL, log[-3000:]
    assert "loop=halve epoch=2 entered while epochs [1] iterate" in log, log[-3000:]
    engine = Engine(build(str(numbers), str(tmp_path / "out")), tmp_path / "state", spark=spark, max_in_flight=3)
    report = engine.run()
    assert report.recovered_at["buffer"] == (1, INF)  # all of epoch 1, none of epoch 2
    assert report.epochs == [2, 3, 4, 5]
    assert differences(held(engine), expected_held(EPOCHS), name="buffer") == []  # epoch 2's sums once, not twice
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


#: Each run is killed at the next point (the n-th time it reaches it, its recovery
#: included) and recovers from the kill before: a worker's epoch done and being taken
#: into the loop; its part before the loop committed while the earlier epoch's is
#: not; the earlier epoch's checkpoint written with the later epoch's sums in the state.
CHAIN = ["epoch.computed:2", "commit.after:2", "state.written:1"]


def test_killed_while_epochs_are_taken_into_the_loop_it_recovers_exactly(spark, numbers: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    for point in CHAIN:
        done = subprocess.run([sys.executable, str(RUNNER), *_args(numbers, tmp_path)], env={**env, "FALKIRK_CRASH_AT": point}, capture_output=True, timeout=600)
        assert done.returncode == -signal.SIGKILL, f"{point} was not reached: {done.stderr.decode()[-3000:]}"
    engine = Engine(build(str(numbers), str(tmp_path / "out")), tmp_path / "state", spark=spark, max_in_flight=3)
    engine.run()
    assert differences(held(engine), expected_held(EPOCHS), name="buffer") == []  # every sum once, not twice
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def _args(numbers: Path, tmp_path: Path) -> list[str]:
    return [str(numbers), str(tmp_path / "out"), str(tmp_path / "state"), "3"]


def test_killed_at_random_moments_it_ends_with_the_exact_output(spark, numbers: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each run is killed a random moment after an epoch entered while another
    iterated (so the kill lands while epochs are inside the loop together)."""
    rng = random.Random(16)
    args = [str(numbers), str(tmp_path / "out"), str(tmp_path / "state"), "3"]
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    kills = 0
    for _ in range(2):
        with (tmp_path / "log").open("w") as log:
            proc = subprocess.Popen([sys.executable, str(RUNNER), *args], env=env, stdout=subprocess.DEVNULL, stderr=log)
            deadline = time.monotonic() + 300
            while "entered while" not in (tmp_path / "log").read_text() and proc.poll() is None:
                assert time.monotonic() < deadline, "no epoch entered while another iterated"
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 3.0))
            proc.send_signal(signal.SIGKILL)
            kills += proc.wait(timeout=60) == -signal.SIGKILL
    assert kills >= 1, "every run ended before its kill"
    engine = Engine(build(str(numbers), str(tmp_path / "out")), tmp_path / "state", spark=spark, max_in_flight=3)
    engine.run()
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []
    assert differences(held(engine), expected_held(EPOCHS), name="buffer") == []


def test_a_later_epoch_that_fails_in_the_loop_lets_the_earlier_one_commit(spark, numbers: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Epoch 2 breaks in its first iteration, while epoch 1 iterates: epoch 1 still
    commits, whole, and the error stops the run at epoch 2, as it would in order."""
    poisoned = tmp_path / "poisoned"
    write(poisoned, [EPOCHS[0], [13]])
    engine = Engine(build(str(poisoned), str(tmp_path / "out"), poison=13), tmp_path / "state", spark=spark, max_in_flight=3)
    with pytest.raises(Exception, match="poisoned: 13"):
        engine.run()
    assert engine.report.epochs == [1]
    assert ("halve", 2, [1]) in engine.report.interleaved
    assert differences(output(tmp_path), expected(EPOCHS[:1]), name="output") == []


def _loop(tmp_path: Path, name: str = "l", interleave: bool = True) -> tuple[Pipeline, object, object]:
    p = Pipeline("refused")
    src = p.source("src", FileSource(str(tmp_path), "csv", "k long, n long"))
    return p, p.iterate(name, interleave=interleave), src


def _close(loop: object, inside: object, fb: object) -> object:
    """Send ``inside`` back to ``fb`` and out of the loop to a sink; returns what leaves."""
    loop.connect(fb, inside.map(f"{loop.name}_back", lambda df: df))  # type: ignore[attr-defined]
    left = loop.leave(f"{loop.name}_out", inside)  # type: ignore[attr-defined]
    left.sink(f"{loop.name}_sink", MemorySink())
    return left


def test_a_loop_interleaves_only_independent_times(tmp_path: Path) -> None:
    p, loop, src = _loop(tmp_path)
    fb = loop.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    inside = loop.enter("in", src).union("u", fb)  # type: ignore[attr-defined]
    _close(loop, inside.aggregate("agg", "k", {"n": ("sum", "n")}).map("again", lambda df: df), fb)
    with pytest.raises(GraphError, match=r"'agg'.*not partitioned by time.*section 3.3"):
        p.check()

    p, loop, src = _loop(tmp_path)
    fb = loop.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    inside = loop.enter("in", src).union("u", fb).buffer("b", policy=EagerCheckpoint())  # type: ignore[attr-defined]
    _close(loop, inside, fb)
    with pytest.raises(GraphError, match=r"'b' has policy EagerCheckpoint.*LazyCheckpoint\(every=1\)"):
        p.check()

    p, first, src = _loop(tmp_path, "first", interleave=False)  # what leaves it is a region's
    fb = first.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    left = _close(first, first.enter("in", src).union("u", fb), fb)  # type: ignore[attr-defined]
    second = p.iterate("second", interleave=True)
    fb2 = second.feedback("fb2", schema="k long, n long")
    _close(second, second.enter("in2", left).union("u2", fb2), fb2)
    with pytest.raises(GraphError, match=r"loop 'second' interleaves.*comes from .* in region 'first'"):
        p.check()

    p, first, src = _loop(tmp_path, "first")
    fb = first.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    _close(first, first.enter("in", src).union("u", fb), fb)  # type: ignore[attr-defined]
    second = p.iterate("second", interleave=True)
    fb2 = second.feedback("fb2", schema="k long, n long")
    _close(second, second.enter("in2", src).union("u2", fb2), fb2)
    with pytest.raises(GraphError, match=r"one interleaved loop"):
        p.check()

    p, loop, src = _loop(tmp_path)
    inside = loop.enter("in", src)  # type: ignore[attr-defined]
    with pytest.raises(GraphError, match=r"buffer.*cannot be inside loop 'l'"):
        inside.buffer("b", retain=2)
    with pytest.raises(GraphError, match="interleave must be True or False"):
        Pipeline("x").iterate("l", interleave="yes")  # type: ignore[arg-type]
