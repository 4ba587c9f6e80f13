"""``examples/components.py`` (a loop with (epoch, iteration) times, eager checkpoints
at every iteration) under SIGKILL: at every crash point - the loop's own included - and
at random moments, restarted with the same arguments, it ends with exactly the whole
output and dead-letter table of a plain-Python union-find over the same input
(``falkirk.testing.components.expected``), with no (vertex, epoch) twice."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.control.faults import LOOP_POINTS
from falkirk.demo.components import OUTPUT_COLUMNS, REJECTED_COLUMNS, build_pipeline
from falkirk.runtime import Engine
from falkirk.testing.components import Expected, expected, write_input
from falkirk.testing.verify import differences
from falkirk.testing.visibility import CommittedOnly
from tests.engine.examples import kill_at_a_random_moment, kill_at_each
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


def run_here(spark: SparkSession, inputs: tuple[Path, Expected], work: Path) -> None:
    """The rest of the run in this process (no second JVM start)."""
    Engine(build_pipeline(str(inputs[0]), str(work / "out"), str(work / "rej")), work / "state", spark=spark).run()


def test_an_uninterrupted_run_matches_union_find(spark: SparkSession, inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    """In this process: the example itself runs, killed, in the chain below."""
    assert len(inputs[1].output) > 20 and inputs[1].output["epoch"].nunique() == 3  # a test that can fail
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[1])


#: One chain (each killed run is a driver start on CI's clock): the loop's own points,
#: mid-loop; then a kill at a random moment. ``epoch.planned``, ``epoch.computed``,
#: ``sink.written``, ``commit.before``, ``commit.after``, ``gc.before`` and
#: ``recovery.restored`` run the same code for any pipeline and are killed at in the
#: clickstream and orders chains.
CHAIN = ["iteration.written:5", "iteration.committed:4", "loop.computed:1"]


def test_the_chain_covers_the_loop_points() -> None:
    assert {point.split(":")[0] for point in CHAIN} == set(LOOP_POINTS)


def test_killed_at_each_crash_point_and_at_a_random_moment(spark: SparkSession, inputs: tuple[Path, Expected], tmp_path: Path) -> None:
    """Each run is killed at the next point (the n-th time that run reaches it, its
    recovery included), so each recovers from the previous kill; then one run is
    killed at a random moment (it may finish first on a fast machine); then the rest
    runs in this process."""
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(inputs, tmp_path, crash=point), CHAIN, visible)
    kill_at_a_random_moment(start(inputs, tmp_path), random.Random(8).uniform(8.0, 16.0), visible)
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[1])
