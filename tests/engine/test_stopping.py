"""Clean stops: ``Engine.stop()`` from another thread, SIGINT and SIGTERM finish the
epochs in flight and say where the run stopped; a second signal abandons them at
once; SIGTERM sent to the whole process group (the JVM too) ends the run with one
clear line. After each, nothing uncommitted is visible, and a run with the same
storage root finishes with exactly an uninterrupted run's whole output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import LazyCheckpoint, Pipeline
from falkirk.io import ParquetTableSink, keyed_generator
from falkirk.runtime import Engine, exit_code
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from falkirk.testing.visibility import CommittedOnly, shown_epochs
from tests.engine.examples import EXAMPLES, run_example_here
from tests.engine.test_clickstream_recovery import check

pytestmark = pytest.mark.slow


def counting(work: Path) -> Pipeline:
    p = Pipeline("stopping")
    (
        p.source("src", keyed_generator(batches=8, rows_per_batch=50, keys=7, seed=5))
        .aggregate("agg", "key", {"n": ("count", None), "s": ("sum", "value")}, policy=LazyCheckpoint(every=3))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def table(work: Path) -> pd.DataFrame:
    return pd.read_parquet(work / "out").sort_values(["epoch", "key"]).reset_index(drop=True)


def test_stop_from_another_thread_finishes_the_epochs_in_flight(spark: SparkSession, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    Engine(counting(reference), str(reference / "state"), spark=spark).run()

    work = tmp_path / "run"
    stopped: list[bool] = []
    engine: Engine

    def on_epoch(epoch: int, _: float, __: object) -> None:
        if epoch == 2 and not stopped:
            waiter = threading.Thread(target=lambda: stopped.append(engine.stop(wait=True, timeout=120)))
            waiter.start()

    engine = Engine(counting(work), str(work / "state"), spark=spark, on_epoch=on_epoch)
    report = engine.run(idle_timeout=float("inf"))  # a service: only the stop ends it
    time.sleep(0.2)
    assert stopped == [True], "stop(wait=True) returns once the run ended"
    assert report.stopped == "stop()" and exit_code(report.stopped) == 0
    last = report.epochs[-1]
    assert 2 <= last < 8 and report.epochs == list(range(1, last + 1)), "the epochs in flight commit, no new one starts"
    assert shown_epochs(work / "out") == list(range(last + 1)), "exactly the committed epochs are visible"
    assert not list((work / "out" / "_pending").iterdir()), "nothing half-written is left"
    assert engine.stop() is True  # no run in progress: nothing to do

    # On the run's own thread (its on_epoch callback) stop() asks and cannot wait.
    asked: list[bool] = []
    inside = Engine(counting(tmp_path / "inside"), str(tmp_path / "inside" / "state"), spark=spark,
                    on_epoch=lambda e, _, __: asked.append(inside.stop()) if e == 1 else None)  # fmt: skip
    assert inside.run().stopped == "stop()" and asked == [False]

    again = Engine(counting(work), str(work / "state"), spark=spark).run()
    assert again.epochs[0] == last + 1 and again.stopped is None
    pd.testing.assert_frame_equal(table(work), table(reference))


def start(inputs: Path, work: Path) -> subprocess.Popen[bytes]:
    args = ["--input", str(inputs), "--output", str(work / "out"), "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / "clickstream.py"), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,  # a process group of its own, as a service's
    )  # fmt: skip


def when_shown(proc: subprocess.Popen[bytes], work: Path, epoch: int) -> None:
    """Wait until the output table shows ``epoch`` (the run is well under way)."""
    deadline = time.monotonic() + 300
    while epoch not in shown_epochs(work / "out"):
        assert proc.poll() is None, "the run ended before it was signalled"
        assert time.monotonic() < deadline
        time.sleep(0.05)


def ended(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err.decode()


def test_signals_stop_or_abandon_and_a_restart_resumes_exactly(spark: SparkSession, tmp_path: Path) -> None:
    inputs, work = tmp_path / "in", tmp_path / "work"
    write_input(inputs, files=16, sessions_per_file=50, users=20, seed=11, bad_fraction=0.05)
    visible = CommittedOnly(work / "state")

    # SIGINT (Ctrl-C): the epochs in flight commit, one line says where it stopped.
    proc = start(inputs, work)
    when_shown(proc, work, 2)
    proc.send_signal(signal.SIGINT)
    code, err = ended(proc)
    assert code == 130, err[-3000:]
    line = next(line for line in err.splitlines() if "stopped (SIGINT) after epoch" in line)
    stopped_at = int(line.split("after epoch ")[1].split(",")[0])
    assert f"to resume from epoch {stopped_at + 1}" in line
    assert shown_epochs(work / "out") == list(range(stopped_at + 1))
    assert not list((work / "out" / "_pending").iterdir()), "nothing half-written is left"
    visible.check()

    # SIGTERM twice: the second abandons the epochs in flight at once.
    proc = start(inputs, work)
    when_shown(proc, work, stopped_at + 2)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    code, err = ended(proc)
    # (The first may have finished the epochs in flight already; after run() returned,
    # SIGTERM's default action ends the process: -15.)
    assert code in (143, -signal.SIGTERM), err[-3000:]
    assert "clickstream: SIGTERM: the epochs in flight were abandoned" in err or "stopped (SIGTERM)" in err
    visible.check()

    # SIGTERM to the whole process group: the JVM stops too; one clear line, no lost data.
    proc = start(inputs, work)
    when_shown(proc, work, max(shown_epochs(work / "out")) + 2)
    os.killpg(proc.pid, signal.SIGTERM)
    code, err = ended(proc)
    assert code == 143, err[-3000:]
    assert err.rstrip().splitlines()[-1].startswith("clickstream: SIGTERM: ")
    visible.check()

    # The rest, in this process: the whole output equals the batch job's.
    args = ["--input", str(inputs), "--output", str(work / "out"), "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    assert run_example_here("clickstream", args) == 0
    check(work, inputs, (batch_output(spark, str(inputs)), batch_rejected(spark, str(inputs))))
