"""``examples/orders.py`` (two sources, fan-out, union, join) under SIGKILL: at every
crash point and at random moments, restarted with the same arguments, it ends with
exactly the whole output and dead-letter table one plain Spark batch job over the same
input gives (``falkirk.testing.orders.batch_expected``, itself checked against a
plain-Python computation of the contract, ``expected``)."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.orders import OUTPUT_COLUMNS, REJECTED_COLUMNS, build_pipeline
from falkirk.runtime import Engine
from falkirk.testing.orders import Expected, batch_expected, expected, write_input
from falkirk.testing.verify import differences
from falkirk.testing.visibility import CommittedOnly
from tests.engine.examples import kill_at_a_random_moment, kill_at_each
from tests.engine.examples import start as run_example

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Expected]:
    """The input, and the whole output of one plain Spark batch job over it (checked
    against the plain-Python reference first: two independent computations agree)."""
    root = tmp_path_factory.mktemp("orders-input")
    write_input(root / "orders", root / "payments", epochs=5, orders_per_epoch=12, customers=6, seed=21)
    batch = batch_expected(spark, str(root / "orders"), str(root / "payments"))
    plain = expected(str(root / "orders"), str(root / "payments"))
    assert differences(batch.output, plain.output) == [] and differences(batch.rejected, plain.rejected) == []
    return root / "orders", root / "payments", batch


def start(inputs: tuple[Path, Path, Expected], work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    orders, payments, _ = inputs
    args = ["--orders", str(orders), "--payments", str(payments), "--output", str(work / "out"),
            "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    return run_example("orders.py", args, crash)


def check(work: Path, want: Expected) -> None:
    out = pd.read_parquet(work / "out")
    assert tuple(out.columns) == OUTPUT_COLUMNS
    assert all(str(out[c].dtype) == "int64" for c in OUTPUT_COLUMNS[1:])
    assert not out.duplicated(["customer_id", "epoch"]).any(), "a (customer_id, epoch) appears twice"
    assert differences(out, want.output, name="output") == []
    rejected = pd.read_parquet(work / "rej")
    assert tuple(rejected.columns) == REJECTED_COLUMNS
    assert rejected["reason"].notna().all()
    assert differences(rejected[["input", "raw"]], want.rejected, name="rejected") == []


#: Each run is killed at the next point (the n-th time that run reaches it, its
#: recovery included): the join's state written and not committed, the join's old
#: state collected; then a run killed at a random moment once epochs are out, and the
#: rest of the input runs to the end. The other generic points run the same code for
#: any pipeline and are killed at in the clickstream chains (each killed run is a
#: driver start on CI's clock).
CHAIN = ["commit.before:3", "gc.before:1"]


def run_here(spark: SparkSession, inputs: tuple[Path, Path, Expected], work: Path) -> None:
    """The rest of the run in this process (no second JVM start)."""
    pipeline = build_pipeline(str(inputs[0]), str(inputs[1]), str(work / "out"), str(work / "rej"))
    Engine(pipeline, work / "state", spark=spark).run()


def test_killed_at_each_crash_point_and_at_a_random_moment(spark: SparkSession, inputs: tuple[Path, Path, Expected], tmp_path: Path) -> None:
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(inputs, tmp_path, crash=point), CHAIN, visible)
    proc = start(inputs, tmp_path)
    deadline = time.monotonic() + 300
    while len(list((tmp_path / "out").glob("epoch-*.parquet"))) <= 3 and proc.poll() is None:
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)
    kill_at_a_random_moment(proc, random.Random(5).uniform(0.0, 2.0), visible)
    # (a kill inside a recovery, recovery.restored, is the clickstream recovery chain's)
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[2])
