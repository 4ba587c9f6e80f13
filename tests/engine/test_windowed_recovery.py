"""``examples/windowed_counts.py`` under SIGKILL: tumbling, sliding and session
windows, with continuous eventual checkpoints (the default), lazy and eager
checkpoints. Killed at every crash point - the CEC log written and not committed,
the commit, the collection of the log and input before T, and inside recovery
(the eventual checkpoint loaded, the input replayed epoch by epoch) - and at random
moments, then started again with the same arguments, it ends with exactly the
windows a plain-Python computation over the same files gives
(:mod:`falkirk.testing.windowed`): no window missing, none twice."""

from __future__ import annotations

import random
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.windowed import (
    CEC_REPLAY_TARGET,
    OUTPUT_COLUMNS,
    build_pipeline,
    policy_named,
    shape_of,
)
from falkirk.graph import PipelineChangedError
from falkirk.runtime import Engine
from falkirk.testing.visibility import CommittedOnly
from falkirk.testing.windowed import expected, read_input, write_input
from tests.engine.examples import finish, kill_at_a_random_moment, kill_at_each
from tests.engine.examples import start as run_example

pytestmark = pytest.mark.slow

#: (window args, watermark delay)
SHAPES = {
    "tumbling": (["--window", "10"], 15),
    "sliding": (["--window", "20", "--slide", "5"], 10),
    "session": (["--session-gap", "4"], 12),
}
#: Small CEC targets, so that G_check rows move T and the log and input before it
#: are collected during these short runs.
CEC_ARGS = ["--replay-target", "60", "--extent-target", "40"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("windowed-input") / "in"
    write_input(root, epochs=7, rows=30, seed=5, spread=25, step=8)
    return root


def shape_args(shape: str) -> tuple[int | None, int | None, int | None]:
    """(window, slide, session gap) of a shape's command-line arguments."""
    args, _ = SHAPES[shape]
    window = int(args[1]) if args[0] == "--window" else None
    slide = int(args[3]) if len(args) > 2 else None
    gap = int(args[1]) if args[0] == "--session-gap" else None
    return window, slide, gap


def want(files: Path, shape: str) -> list[tuple[int, int, str, int]]:
    return expected(read_input(files), shape_of(*shape_args(shape)), SHAPES[shape][1]).windows


def run_here(
    spark: SparkSession, files: Path, work: Path, shape: str, policy: str = "cec", cec_args: list[str] = CEC_ARGS, max_epochs: int | None = None
) -> None:
    """What ``start`` runs, in this process (no second JVM start), to the end of the
    input (or ``max_epochs`` epochs)."""
    targets = dict(zip(cec_args[::2], (int(x) for x in cec_args[1::2]), strict=True))
    chosen = policy_named(policy, targets.get("--replay-target", CEC_REPLAY_TARGET), targets.get("--extent-target"))
    pipeline = build_pipeline(str(files), str(work / "out"), shape_of(*shape_args(shape)), SHAPES[shape][1], chosen)
    Engine(pipeline, work / "state", spark=spark).run(finish=True, max_epochs=max_epochs)


def start(
    files: Path, work: Path, shape: str, policy: str = "cec", crash: str | None = None, cec_args: list[str] = CEC_ARGS
) -> subprocess.Popen[bytes]:
    args, delay = SHAPES[shape]
    extra = cec_args if policy == "cec" else []
    return run_example(
        "windowed_counts.py",
        ["--input", str(files), "--output", str(work / "out"), "--storage", str(work / "state"), "--watermark-delay", str(delay),
         *args, "--policy", policy, *extra],
        crash,
    )


def check(files: Path, work: Path, shape: str) -> None:
    out = pd.read_parquet(work / "out")
    assert list(out.columns) == OUTPUT_COLUMNS
    got = sorted(out.itertuples(index=False, name=None))
    expected_rows = want(files, shape)
    assert len(expected_rows) > 20  # a test that can fail
    assert got == expected_rows


def test_an_uninterrupted_run_matches_plain_python(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    """(Sliding and session windows are compared with Structured Streaming's, in
    test_windows_vs_structured_streaming; the example itself runs in the crash chains
    below.)"""
    run_here(spark, files, tmp_path, "tumbling")
    check(files, tmp_path, "tumbling")
    run_here(spark, files, tmp_path, "tumbling")  # a restart after the end adds nothing
    check(files, tmp_path, "tumbling")


#: Each run is killed at the next point (the n-th time it reaches it, recovery
#: included): the log written and not committed, the collection of the extent and
#: input before T - each recovered from by a recovery that itself rebuilt an eventual
#: checkpoint; then a run killed at a random moment, and the last run finishes. (A
#: kill after a commit under CEC: the sliding chain below.)
SESSION_CHAIN = ["state.written:2", "gc.before:1"]


def test_cec_killed_at_every_step_and_at_a_random_moment(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(files, tmp_path, "session", crash=point), SESSION_CHAIN, visible)
    kill_at_a_random_moment(start(files, tmp_path, "session"), random.Random(23).uniform(6, 16), visible)
    run_here(spark, files, tmp_path, "session")
    check(files, tmp_path, "session")


def test_cec_killed_before_a_commit_and_during_recovery(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    """Sliding windows without G_check (T stays at the oldest open window's opening,
    epochs back): a kill after several commits, which leaves a committed extent to rebuild and
    input to replay; the next ones land inside those recoveries: the eventual
    checkpoint loaded, an epoch replayed. (``recovery.restored``, the end of every
    recovery, is killed at in the other examples' chains; each killed run is a driver
    start on CI's clock.)"""
    lagging = ["--replay-target", "100000"]
    points = ["commit.after:5", "catch_up.started:1", "catch_up.epoch:2"]
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(files, tmp_path, "sliding", crash=point, cec_args=lagging), points, visible)
    run_here(spark, files, tmp_path, "sliding", cec_args=lagging)
    check(files, tmp_path, "sliding")


@pytest.mark.parametrize(("policy", "shape", "point"), [("lazy", "session", "commit.after:4"), ("eager", "sliding", "state.written:5")])
def test_checkpoint_policies_killed(spark: SparkSession, files: Path, tmp_path: Path, policy: str, shape: str, point: str) -> None:
    assert finish(start(files, tmp_path, shape, policy, crash=point)) == -signal.SIGKILL
    run_here(spark, files, tmp_path, shape, policy)
    check(files, tmp_path, shape)


def test_a_restart_with_other_settings_is_refused(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    """State written under one policy or window cannot be read as another: refused
    before any work, naming the change (the example exits 2 with it), the storage
    untouched; the original settings then finish exactly."""
    run_here(spark, files, tmp_path, "sliding", max_epochs=3)  # a committed root, no driver start
    proc = start(files, tmp_path, "sliding", "lazy")
    _, err = proc.communicate(timeout=600)
    refused = "policy was ContinuousEventualCheckpoint, is now LazyCheckpoint"
    assert proc.returncode == 2 and refused in err.decode(), err.decode()[-2000:]
    with pytest.raises(PipelineChangedError, match=r"setting 'shape' was Sliding\(size=20, slide=5\), is now Tumbling\(size=10\)"):
        run_here(spark, files, tmp_path, "tumbling")
    run_here(spark, files, tmp_path, "sliding")
    check(files, tmp_path, "sliding")
