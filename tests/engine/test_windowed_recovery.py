"""``examples/windowed_counts.py`` under SIGKILL: tumbling, sliding and session
windows, with continuous eventual checkpoints (the default), lazy and eager
checkpoints. Killed at every crash point - the CEC log written and not committed,
the commit, the collection of the log and input before T, and inside recovery
(the eventual checkpoint loaded, the input replayed epoch by epoch) - and at random
moments, then started again with the same arguments, it ends with exactly the
windows a plain-Python computation over the same files gives
(:mod:`falkirk.demo.windowed_reference`): no window missing, none twice."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.windowed import OUTPUT_COLUMNS, expected, read_input, shape_of, write_input
from tests.engine.examples import finish
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


def want(files: Path, shape: str) -> list[tuple[int, int, str, int]]:
    args, delay = SHAPES[shape]
    window = int(args[1]) if args[0] == "--window" else None
    slide = int(args[3]) if len(args) > 2 else None
    gap = int(args[1]) if args[0] == "--session-gap" else None
    return expected(read_input(files), shape_of(window, slide, gap), delay).windows


def start(files: Path, work: Path, shape: str, policy: str = "cec", crash: str | None = None) -> subprocess.Popen[bytes]:
    args, delay = SHAPES[shape]
    extra = CEC_ARGS if policy == "cec" else []
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


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_uninterrupted_run_matches_plain_python(files: Path, tmp_path: Path, shape: str) -> None:
    assert finish(start(files, tmp_path, shape)) == 0
    check(files, tmp_path, shape)
    assert finish(start(files, tmp_path, shape)) == 0  # a restart after the end adds nothing
    check(files, tmp_path, shape)


CEC_MATRIX = [
    ("session", "state.written:3"),
    ("session", "epoch.computed:4"),
    ("session", "commit.after:5"),
    ("session", "gc.before:3"),
    ("sliding", "sink.written:6"),
    ("sliding", "commit.before:7"),
    ("tumbling", "epoch.planned:8"),
    ("tumbling", "state.written:8"),
]


@pytest.mark.parametrize(("shape", "point"), CEC_MATRIX)
def test_cec_killed_at_a_crash_point(files: Path, tmp_path: Path, shape: str, point: str) -> None:
    assert finish(start(files, tmp_path, shape, crash=point)) == -signal.SIGKILL, f"{point} was not reached"
    assert finish(start(files, tmp_path, shape)) == 0
    check(files, tmp_path, shape)


@pytest.mark.parametrize("point", ["catch_up.started:1", "catch_up.epoch:2", "recovery.restored:1"])
def test_cec_killed_during_recovery(files: Path, tmp_path: Path, point: str) -> None:
    """The first kill leaves a committed extent to rebuild and input to replay; the
    second lands inside that recovery."""
    assert finish(start(files, tmp_path, "session", crash="commit.after:6")) == -signal.SIGKILL
    assert finish(start(files, tmp_path, "session", crash=point)) == -signal.SIGKILL, f"{point} was not reached"
    assert finish(start(files, tmp_path, "session")) == 0
    check(files, tmp_path, "session")


@pytest.mark.parametrize(("policy", "shape", "point"), [("lazy", "session", "commit.after:4"), ("eager", "sliding", "state.written:5")])
def test_checkpoint_policies_killed(files: Path, tmp_path: Path, policy: str, shape: str, point: str) -> None:
    assert finish(start(files, tmp_path, shape, policy, crash=point)) == -signal.SIGKILL
    assert finish(start(files, tmp_path, shape, policy)) == 0
    check(files, tmp_path, shape)


def test_cec_killed_at_random_moments(files: Path, tmp_path: Path) -> None:
    rng = random.Random(23)
    for _ in range(3):
        proc = start(files, tmp_path, "session")
        time.sleep(rng.uniform(6, 16))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        finish(proc)
    assert finish(start(files, tmp_path, "session")) == 0
    check(files, tmp_path, "session")
