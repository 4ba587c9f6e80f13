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


def test_an_uninterrupted_run_matches_plain_python(files: Path, tmp_path: Path) -> None:
    """(Sliding and session windows run uninterrupted in the Structured Streaming
    comparison.)"""
    assert finish(start(files, tmp_path, "tumbling")) == 0
    check(files, tmp_path, "tumbling")
    assert finish(start(files, tmp_path, "tumbling")) == 0  # a restart after the end adds nothing
    check(files, tmp_path, "tumbling")


#: Each run is killed at the next point (the n-th time it reaches it, recovery
#: included), then the last run finishes: every CEC step - the log written and not
#: committed, the commit, the collection of the extent and input before T - is
#: recovered from, by a recovery that itself rebuilt an eventual checkpoint.
CHAINS = {
    "session": ["state.written:2", "commit.after:2", "gc.before:1", "epoch.computed:1", "sink.written:1"],
    "sliding": ["epoch.planned:3", "commit.before:2", "state.written:1", "commit.after:2"],
}


@pytest.mark.parametrize("shape", sorted(CHAINS))
def test_cec_killed_at_every_step(files: Path, tmp_path: Path, shape: str) -> None:
    for point in CHAINS[shape]:
        assert finish(start(files, tmp_path, shape, crash=point)) == -signal.SIGKILL, f"{point} was not reached"
    assert finish(start(files, tmp_path, shape)) == 0
    check(files, tmp_path, shape)


def test_cec_killed_during_recovery(files: Path, tmp_path: Path) -> None:
    """The first kill leaves a committed extent to rebuild and input to replay; the
    next ones land inside those recoveries: the eventual checkpoint loaded, an
    epoch replayed, everything restored."""
    # No G_check: T stays at the oldest open sliding window's opening, epochs back.
    lagging = ["--replay-target", "100000"]
    for point in ["commit.after:6", "catch_up.started:1", "catch_up.epoch:2", "recovery.restored:1"]:
        assert finish(start(files, tmp_path, "sliding", crash=point, cec_args=lagging)) == -signal.SIGKILL, f"{point} was not reached"
    assert finish(start(files, tmp_path, "sliding", cec_args=lagging)) == 0
    check(files, tmp_path, "sliding")


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


def test_a_restart_with_other_settings_is_refused(files: Path, tmp_path: Path) -> None:
    """State written under one policy or window cannot be read as another: a clear
    error (exit 2), the storage untouched; the original settings then finish exactly."""
    assert finish(start(files, tmp_path, "sliding", crash="commit.after:3")) == -signal.SIGKILL
    for shape, policy, words in (("sliding", "lazy", "another policy"), ("tumbling", "cec", "other settings")):
        proc = start(files, tmp_path, shape, policy)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 2 and words in err.decode(), err.decode()[-2000:]
    assert finish(start(files, tmp_path, "sliding")) == 0
    check(files, tmp_path, "sliding")

