"""``examples/components.py`` (a loop with (epoch, iteration) times, eager checkpoints
at every iteration) under SIGKILL: at every crash point - the loop's own included - and
at random moments, restarted with the same arguments, it ends with exactly the whole
output and dead-letter table of a plain-Python union-find over the same input
(``falkirk.demo.components.expected``), with no (vertex, epoch) twice."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.components import (
    OUTPUT_COLUMNS,
    REJECTED_COLUMNS,
    Expected,
    expected,
    write_input,
)
from falkirk.demo.verify import differences
from falkirk.runtime.faults import LOOP_POINTS
from tests.engine.examples import finish
from tests.engine.examples import start as run_example

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Expected]:
    root = tmp_path_factory.mktemp("components-input")
    write_input(root / "edges", epochs=3, edges_per_epoch=14, vertices=40, seed=11)
    return root / "edges", expected(str(root / "edges"))


def start(inputs: tuple[Path, Expected], work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    args = ["--edges", str(inputs[0]), "--output", str(work / "out"), "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    return run_example("components.py", args, crash)


def check(work: Path, want: Expected) -> None:
    out = pd.read_parquet(work / "out")
    assert tuple(out.columns) == OUTPUT_COLUMNS
    assert all(str(out[c].dtype) == "int64" for c in OUTPUT_COLUMNS)
    assert not out.duplicated(["vertex", "epoch"]).any(), "a (vertex, epoch) appears twice"
    assert differences(out, want.output, name="output") == []
    rejected = pd.read_parquet(work / "rej")
    assert tuple(rejected.columns) == REJECTED_COLUMNS
    assert rejected["reason"].notna().all()
    assert differences(rejected[["raw"]], want.rejected, name="rejected") == []


def test_an_uninterrupted_run_matches_union_find(inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    assert len(inputs[1].output) > 20 and inputs[1].output["epoch"].nunique() == 3  # a test that can fail
    assert finish(start(inputs, tmp_path)) == 0
    check(tmp_path, inputs[1])


#: Which occurrence of each point to kill at: mid-loop for the loop's own points.
OCCURRENCE = {"gc.before": 1, "iteration.written": 5, "iteration.committed": 7, "loop.computed": 2}
#: The loop's own points, and those of the epoch around it whose work changes with
#: a loop (the epoch's commit now holds the loop's records; its sink follows it).
#: ``epoch.planned``, ``epoch.computed`` and ``commit.after`` run the same code for any
#: pipeline and are killed at in the other examples' matrices.
CRASH_POINTS = [*LOOP_POINTS, "sink.written", "commit.before", "gc.before"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_at_each_crash_point(point: str, inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    assert finish(start(inputs, tmp_path, crash=f"{point}:{OCCURRENCE.get(point, 3)}")) == -signal.SIGKILL
    assert finish(start(inputs, tmp_path)) == 0
    check(tmp_path, inputs[1])


def test_repeated_kills_at_random_moments_and_during_recovery(inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    rng = random.Random(8)
    for _ in range(2):
        proc = start(inputs, tmp_path)
        time.sleep(rng.uniform(8.0, 20.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        finish(proc)
    assert finish(start(inputs, tmp_path, crash="recovery.restored:1")) == -signal.SIGKILL
    assert finish(start(inputs, tmp_path)) == 0
    check(tmp_path, inputs[1])
