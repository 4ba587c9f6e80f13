"""Loops in the engine: iterations as (epoch, iteration) times, the fixed point and the
iteration limit, checkpoints at iterations and at epoch ends, recovery in the middle
of a loop (the paper's Figure 7(c): a processor re-sends its logged messages of the
iteration its receiver rolled back to), partial failures, and what the graph refuses.
Every run's whole output is compared with a plain-Python computation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F

from falkirk.graph import (
    EagerCheckpoint,
    FullHistory,
    GlobalCheckpoints,
    GraphError,
    LazyCheckpoint,
    Pipeline,
)
from falkirk.io import FileSource, MemorySink, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.testing.verify import differences
from falkirk.time.ticks import Tick
from tests.engine.loop_pipeline import build, expected, write

RUNNER = Path(__file__).with_name("loop_pipeline.py")
EPOCHS = [[(1, 2), (2, 0), (3, 4)], [(1, 1), (4, 3)], [(2, 5), (5, 0)], [(3, 1)]]


@pytest.fixture()
def rows(tmp_path: Path) -> Path:
    write(tmp_path / "in", EPOCHS)
    return tmp_path / "in"


def output(work: Path) -> pd.DataFrame:
    return pd.read_parquet(work / "out")[["k", "count", "epoch"]]


def test_a_loop_iterates_to_its_fixed_point_each_epoch(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(build(str(rows), str(tmp_path / "out"), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark)
    iterations = []
    engine.on_epoch = lambda *_: iterations.append(engine.loops.iterations["countdown"])
    engine.run()
    assert iterations == [5, 4, 6, 2]  # the largest n of each epoch, plus one
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []
    meta = MetaStore(tmp_path / "state", read_only=True)
    # lazy: the loop's state is checkpointed at the end of epochs 2 and 4, as (e, ∞)
    assert [(t, kind) for t, kind, _ in meta.state_files("steps")][-1][0] == Tick(4, float("inf"))
    meta.close()


def test_the_iteration_limit_cuts_an_epochs_iterations(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Engine(build(str(rows), str(tmp_path / "out"), EagerCheckpoint(), max_iterations=3), tmp_path / "state", spark=spark).run()
    assert differences(output(tmp_path), expected(EPOCHS, max_iterations=3), name="output") == []


def test_eager_checkpoints_are_committed_at_every_iteration(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = Engine(build(str(rows), str(tmp_path / "out"), EagerCheckpoint()), tmp_path / "state", spark=spark).run(max_epochs=1)
    assert [c for c in report.checkpoints if c[0] == "steps"] == [("steps", 1, "base")] + [("steps", 1, "delta")] * 4
    meta = MetaStore(tmp_path / "state", read_only=True)
    ticks = [t for t, _, _ in meta.state_files("steps")]
    # (1, ∞) is the last iteration's state: an empty delta, nothing written
    assert ticks == [Tick(1, 0), Tick(1, 1), Tick(1, 2), Tick(1, 3), Tick(1, 4), Tick(1, float("inf"))]
    assert [files for t, _, files in meta.state_files("steps") if t == Tick(1, float("inf"))] == [()]
    meta.close()


def _crash(rows: Path, work: Path, spec: str, point: str, *flags: str) -> None:
    env = {**os.environ, "FALKIRK_CRASH_AT": point}
    args = [str(rows), str(work / "out"), str(work / "state"), spec, "1000", *flags]
    proc = subprocess.run([sys.executable, str(RUNNER), *args], env=env, capture_output=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def test_a_crash_mid_loop_resumes_from_the_last_committed_iteration(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Figure 7(c) in the engine: ``steps`` (eager: checkpoint and log every iteration)
    rolls back to the iteration it last committed, inside epoch 2, and so does the
    union before it, which logs what it sends; ``down`` discarded what it sent and
    rolls back one iteration further, fed from the union's log of (2, 2): the loop
    goes on from there, the epoch is not started again."""
    _crash(rows, tmp_path, "eager", "iteration.committed:8", "log_union")  # epoch 1 has 5 iterations
    pipeline = build(str(rows), str(tmp_path / "out"), EagerCheckpoint(), log_union=True)
    report = Engine(pipeline, tmp_path / "state", spark=spark).run()
    at = report.recovered_at
    assert at["steps"] == (2, 2) and at["here"] == (2, 2), at
    assert at["down"] == (2, 1) and at["again"] == (2, 1), at
    assert at["rows"] == 2  # upstream of the loop: epoch 2 was committed before the loop ran it
    assert at["leave"] == 1  # it gets epoch 2 once its iterations are over
    assert report.resent["here.out>down"] == [(2, 2)]
    assert report.resent["steps.out>leave"] == [2]  # steps's logged iterations (2, 0..2) leave as epoch 2
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


@pytest.mark.parametrize(
    ("spec", "point"),
    # the loop's own steps (the epoch's generic points are the example chains': each
    # case is a driver start on CI's clock)
    [("eager", "iteration.written:3"), ("lazy:2", "loop.computed:3")],
)
def test_crashes_at_the_loops_steps(spark, rows: Path, tmp_path: Path, spec: str, point: str) -> None:  # type: ignore[no-untyped-def]
    _crash(rows, tmp_path, spec, point)
    # Input files deleted and put back byte for byte are accepted by the hashes the
    # commits carried - also that of what came before a loop whose epoch did not
    # commit (lazy:2 - epoch 3, replayed from the checkpoint at 2 - read again).
    store = MetaStore(tmp_path / "state", read_only=True)
    hashed = {name for o in store.offsets("rows").values() if o for name in o.get("content", {})}
    store.close()
    assert hashed and (spec == "eager" or "rows-002.csv" in hashed), hashed
    for name in sorted(hashed):
        content = (rows / name).read_bytes()
        (rows / name).unlink()
        (rows / name).write_bytes(content)
    policy = LazyCheckpoint(every=2, compact_every=2) if spec.startswith("lazy") else EagerCheckpoint(compact_every=3)
    report = Engine(build(str(rows), str(tmp_path / "out"), policy), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_a_failed_loop_processor_rolls_back_only_what_it_must(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(build(str(rows), str(tmp_path / "out"), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark, max_in_flight=1)
    failed: list[int] = []

    def fail_once(epoch: int, *_: object) -> None:
        if epoch == 3 and not failed:  # the epoch commits again after the rollback
            failed.append(epoch)
            engine.fail("steps")

    engine.on_epoch = fail_once
    report = engine.run()
    failed, epoch, chosen = report.partial[0]
    assert failed == frozenset({"steps"}) and epoch == 3
    # steps goes back to its lazy checkpoint (2, ∞); what feeds it persists nothing and
    # re-reads epoch 3; the sink after the loop writes epoch 3 again (the same rows)
    assert chosen["steps"] == 2 and chosen["rows"] == 2, chosen
    assert len(report.partial) == 1
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_a_loop_with_a_logged_feedback(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The feedback logs what it passes on (Figure 7(c)'s q); without a logging union
    a crash mid-loop takes the loop back to the epoch's start, and ends exact."""
    _crash(rows, tmp_path, "eager", "iteration.committed:7", "log_feedback")
    report = Engine(build(str(rows), str(tmp_path / "out"), EagerCheckpoint(), log_feedback=True), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


# -- what the graph refuses -----------------------------------------------------------------


def _loop_graph(tmp_path: Path) -> tuple[Pipeline, object, object]:
    p = Pipeline("g")
    src = p.source("src", FileSource(str(tmp_path), "csv", "k long, n long"))
    loop = p.iterate("l")
    return p, loop, src


def test_loops_are_checked_when_built(tmp_path: Path) -> None:
    p, loop, src = _loop_graph(tmp_path)
    fb = loop.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    inside = loop.enter("in", src).union("u", fb)  # type: ignore[attr-defined]
    with pytest.raises(GraphError, match="different scopes"):
        inside.union("mixed", src)
    with pytest.raises(GraphError, match="cannot be inside loop"):
        inside.sink("out", MemorySink())
    with pytest.raises(GraphError, match=r"join.*cannot be inside loop"):
        inside.join("j", inside, "k")
    with pytest.raises(GraphError, match="where it can use"):
        inside.aggregate("agg", "k", {"n": ("count", None)}, policy=FullHistory())
    with pytest.raises(GraphError, match="must read a stream of loop"):
        loop.leave("out_of_nothing", src)  # type: ignore[attr-defined]
    with pytest.raises(GraphError, match="not connected"):
        loop.leave("l_out", inside).sink("s", MemorySink())  # type: ignore[attr-defined]
        p.check()
    loop.connect(fb, inside)  # type: ignore[attr-defined]
    with pytest.raises(GraphError, match="connected already"):
        loop.connect(fb, inside)  # type: ignore[attr-defined]
    p.check()
    with pytest.raises(GraphError, match="max_iterations"):
        p.iterate("l2", max_iterations=0)
    with pytest.raises(GraphError, match="global checkpoints"):
        Pipeline("x", checkpoints=GlobalCheckpoints(every=2)).iterate("l")


def test_a_feedback_whose_input_does_not_match_its_schema_is_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    p, loop, src = _loop_graph(tmp_path)
    fb = loop.feedback("fb", schema="k long, n string")  # type: ignore[attr-defined]
    inside = loop.enter("in", src)  # type: ignore[attr-defined]
    loop.connect(fb, inside.map("m", lambda df: df.select("k", F.col("n"))))  # type: ignore[attr-defined]
    loop.leave("out", inside.union("u", fb.map("cast", lambda df: df.select("k", F.col("n").cast("long"))))).sink("s", MemorySink())  # type: ignore[attr-defined]
    with pytest.raises(GraphError, match=r"feedback .fb.*declares"):
        Engine(p, tmp_path / "state", spark=spark).run()


def test_a_loop_without_a_leave_is_refused(tmp_path: Path) -> None:
    p, loop, src = _loop_graph(tmp_path)
    fb = loop.feedback("fb", schema="k long, n long")  # type: ignore[attr-defined]
    inside = loop.enter("in", src).union("u", fb)  # type: ignore[attr-defined]
    loop.connect(fb, inside)  # type: ignore[attr-defined]
    inside.map("m", lambda df: df)
    with pytest.raises(GraphError, match=r"no leave|goes nowhere"):
        p.check()


def test_sinks_after_a_loop_see_each_epoch_once(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A second run on the same storage reads nothing new and writes nothing again."""
    pipeline = build(str(rows), str(tmp_path / "out"), EagerCheckpoint())
    Engine(pipeline, tmp_path / "state", spark=spark).run()
    again = Engine(build(str(rows), str(tmp_path / "out"), EagerCheckpoint()), tmp_path / "state", spark=spark).run()
    assert again.epochs == []
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_status_and_the_dashboard_show_a_loops_times(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With the dashboard's telemetry on, a loop pipeline runs; ``falkirk status``
    reads its root: loop processors' rollback points are (epoch, iteration) ticks,
    in plain JSON."""
    import json

    from falkirk.ops.status import status

    pipeline = build(str(rows), str(tmp_path / "out"), EagerCheckpoint())
    engine = Engine(pipeline, tmp_path / "state", spark=spark, ui="127.0.0.1:0")
    engine.run(max_epochs=2)
    engine.close()
    report = status(str(tmp_path / "state"))
    json.loads(json.dumps(report, allow_nan=False))
    assert report["processors"]["steps"]["rollback_points"][-1] == [2, "inf"]
    assert report["processors"]["steps"]["frontier"] == 2 and report["processors"]["rows"]["frontier"] == 2
    assert report["recovery"]["frontiers"]["steps"] is not None


def test_later_epochs_enter_while_an_earlier_one_iterates(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Upstream of the loop, epoch 2 is computed by a worker while epoch 1 still
    iterates on the main thread (max_in_flight=2)."""
    engine = Engine(build(str(rows), str(tmp_path / "out"), LazyCheckpoint(every=2)), tmp_path / "state", spark=spark, max_in_flight=2)
    report = engine.run()
    assert report.epochs == [1, 2, 3, 4]
    upstream_2 = report.step_finished["start"][1]  # epoch 2's step before the loop
    loop_1 = report.step_finished["steps"][0]  # epoch 1's last iteration
    assert upstream_2 < loop_1
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_notifications_inside_a_loop_are_per_iteration(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``on_epoch_end`` inside a loop is told each (epoch, iteration) once it is
    complete, for every key holding state that got no rows at that time."""
    import pandas as pd_

    p = Pipeline("notified")
    src = p.source("rows", FileSource(str(rows), "csv", "k long, n long", options={"header": "true"}))
    loop = p.iterate("l")
    again = loop.feedback("again", schema="k long, m long")
    here = loop.enter("enter", src.map("start", lambda df: df.select("k", F.col("n").alias("m")))).union("here", again)
    loop.connect(again, here.map("down", lambda df: df.filter("m > 0").select("k", (F.col("m") - 1).alias("m"))))

    def seen(key, rows_, state):  # type: ignore[no-untyped-def]
        return None, pd_.DataFrame({"seen": [1]})

    def notified(key, state, time):  # type: ignore[no-untyped-def]
        return pd_.DataFrame({"k": [key], "e": [time[0]], "i": [time[1]]}), state

    told = here.stateful(
        "seen", "k", seen, state_schema="seen long", output_schema="k long, e long, i long", on_epoch_end=notified
    )
    loop.leave("out", told).sink("sink", ParquetTableSink(str(tmp_path / "out"), epoch_column=None))
    Engine(p, tmp_path / "state", spark=spark).run()
    got = pd.read_parquet(tmp_path / "out").astype("int64")
    want, held = [], set()
    for e, epoch_rows in enumerate(EPOCHS, start=1):
        iterations = max(n for _, n in epoch_rows) + 1
        for i in range(iterations):
            arriving = {k for k, n in epoch_rows if n >= i}
            want += [(k, e, i) for k in sorted(held - arriving)]
            held |= arriving
    assert differences(got, pd.DataFrame(want, columns=["k", "e", "i"]).astype("int64"), name="notifications") == []
