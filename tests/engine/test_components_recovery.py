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
from pyspark.sql import SparkSession

from falkirk.demo.components import (
    OUTPUT_COLUMNS,
    REJECTED_COLUMNS,
    Expected,
    build_pipeline,
    expected,
    write_input,
)
from falkirk.demo.verify import differences
from falkirk.runtime import Engine
from falkirk.runtime.faults import LOOP_POINTS
from tests.engine.examples import finish, kill_at_each
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


#: Each run is killed at the next point (the n-th time that run reaches it, its
#: recovery included; mid-loop for the loop's own points): the loop's points, and
#: those of the epoch around it whose work changes with a loop (the epoch's commit
#: holds the loop's records; its sink follows it). ``epoch.planned``,
#: ``epoch.computed`` and ``commit.after`` run the same code for any pipeline and are
#: killed at in the other examples' chains.
CHAINS = {
    "loop": ["iteration.written:5", "iteration.committed:4", "loop.computed:1"],
    "epoch": ["sink.written:2", "commit.before:1", "gc.before:1"],
}


def test_the_chains_cover_the_loop_points() -> None:
    covered = {point.split(":")[0] for chain in CHAINS.values() for point in chain}
    assert covered == {*LOOP_POINTS, "sink.written", "commit.before", "gc.before"}


def run_here(spark: SparkSession, inputs: tuple[Path, Expected], work: Path) -> None:
    """The rest of the run in this process (no second JVM start)."""
    Engine(build_pipeline(str(inputs[0]), str(work / "out"), str(work / "rej")), work / "state", spark=spark).run()


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_killed_at_each_crash_point(spark: SparkSession, chain: str, inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    kill_at_each(lambda point: start(inputs, tmp_path, crash=point), CHAINS[chain])
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[1])


def test_kills_during_recovery_and_at_random_moments(spark: SparkSession, inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    """A kill mid-run leaves work to recover; the next kill lands inside that
    recovery; then runs killed at random moments (one may finish before its moment
    comes on a fast machine), then the rest."""
    kill_at_each(lambda point: start(inputs, tmp_path, crash=point), ["commit.after:2", "recovery.restored:1"])
    rng = random.Random(8)
    for _ in range(2):
        proc = start(inputs, tmp_path)
        time.sleep(rng.uniform(8.0, 20.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        finish(proc)
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[1])
