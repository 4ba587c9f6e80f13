"""Rescaling (issue 34, item 3): the number of keyed-state partitions is the root's,
recorded at its first run; ``Engine(parallelism=N)`` changes it on purpose and the
state is re-partitioned as it is restored. Each pipeline runs 4 -> 16 -> 2
partitions, a part of its input each time, and its whole output is compared with an
independent computation: windows under continuous eventual checkpoints (their log
too), a loop's per-key state (``stateful``), a join's rows and an aggregate.
After each rescale every state's runs have the new number of partitions (what a
root created with it has)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.clickstream import build_pipeline as clickstream
from falkirk.demo.components import build_pipeline as components
from falkirk.demo.windowed import build_pipeline as windowed
from falkirk.demo.windowed import policy_named, shape_of
from falkirk.graph import GraphError, Pipeline
from falkirk.runtime import Engine
from falkirk.spark.rows import KeyedRows
from falkirk.spark.state import KeyedState
from falkirk.testing import clickstream as clicks
from falkirk.testing import components as edges
from falkirk.testing import windowed as words
from falkirk.testing.verify import differences
from tests.engine.test_graphs import graph, sides  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow

#: The number of partitions of each run, and the epochs it commits (None: the rest).
STEPS: list[tuple[int, int | None]] = [(4, 2), (16, 2), (2, None)]


def partitions_of(engine: Engine) -> set[int]:
    """The numbers of partitions of every run of every keyed state the engine holds."""
    found: set[int] = set()
    for operator in engine.state.operators.values():
        for held in vars(operator).values():
            if isinstance(held, KeyedState):
                found |= {run.rdd.getNumPartitions() for run in [held.base, *held.deltas]}
            elif isinstance(held, KeyedRows):
                found |= {run.rdd.getNumPartitions() for run in held.runs}
    return found


def run_rescaled(spark: SparkSession, build: Any, root: Path, *, finish: bool = False) -> None:
    """Run the pipeline ``build()`` makes once per step of :data:`STEPS`, each with its
    number of partitions; check what each run says and holds."""
    recorded: int | None = None
    for partitions, epochs in STEPS:
        seen: list[set[int]] = []
        engine = Engine(build(), root, spark=spark, parallelism=partitions)
        engine.on_epoch = lambda *_, seen=seen, engine=engine: seen.append(partitions_of(engine))
        report = engine.run(max_epochs=epochs, finish=finish and epochs is None)
        assert report.partitions == partitions
        assert report.rescaled_from == recorded, "a change of the number is a rescale, and said"
        if recorded is not None:
            assert f"rescaled: the state went from {recorded} to {partitions} partitions" in str(report)
        assert seen and all(found <= {partitions} for found in seen), seen  # every run, in every epoch
        assert any(seen), "the pipeline holds keyed state"
        recorded = partitions


def test_windows_under_continuous_eventual_checkpoints(spark: SparkSession, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    words.write_input(inputs, epochs=5, rows=30, seed=5, spread=25, step=8)
    shape = shape_of(10, None, None)
    policy = policy_named("cec", 60, 40)
    run_rescaled(spark, lambda: windowed(str(inputs), str(tmp_path / "out"), shape, 15, policy), tmp_path / "state", finish=True)
    got = sorted(pd.read_parquet(tmp_path / "out").itertuples(index=False, name=None))
    want = words.expected(words.read_input(inputs), shape, 15).windows
    assert len(want) > 20 and got == want


def test_a_loops_state(spark: SparkSession, tmp_path: Path) -> None:
    inputs = tmp_path / "edges"
    edges.write_input(inputs, epochs=3, edges_per_epoch=14, vertices=30, seed=11)
    want = edges.expected(str(inputs))
    global STEPS
    saved, STEPS = STEPS, [(4, 1), (16, 1), (2, None)]
    try:
        run_rescaled(spark, lambda: components(str(inputs), str(tmp_path / "out"), str(tmp_path / "rej")), tmp_path / "state")
    finally:
        STEPS = saved
    assert differences(pd.read_parquet(tmp_path / "out"), want.output, name="output") == []


def test_a_join_and_an_aggregate_of_a_union(spark: SparkSession, sides: Path, tmp_path: Path) -> None:  # noqa: F811
    run_rescaled(spark, lambda: graph(sides, tmp_path), tmp_path / "state")
    want = pd.DataFrame(
        [("y", 2, 10, 1), ("x", 1, 20, 2), ("x", 3, 20, 2), ("x", 3, 40, 3), ("z", 4, 30, 3),
         ("x", 6, 40, 4), ("y", 5, None, 4)],
        columns=["k", "v", "w", "epoch"],
    )  # fmt: skip (as test_graphs computes them by hand)
    assert differences(pd.read_parquet(tmp_path / "pairs"), want) == []
    rows = pd.concat(
        [pd.read_parquet(f).rename(columns={c: "n"}).assign(epoch=e + 1) for side, c in (("a", "v"), ("b", "w"))
         for e, f in enumerate(sorted((sides / side).glob("*.parquet")))]
    )  # fmt: skip
    totals = [
        (k, len(upto := rows[(rows["k"] == k) & (rows["epoch"] <= e)]), int(upto["n"].sum()), e)
        for e in sorted(rows["epoch"].unique()) for k in sorted(rows[rows["epoch"] == e]["k"].unique())
    ]  # fmt: skip
    want_counts = pd.DataFrame(totals, columns=["k", "rows", "total", "epoch"])
    assert differences(pd.read_parquet(tmp_path / "counts"), want_counts) == []


def test_the_number_is_the_roots_not_the_sessions(spark: SparkSession, tmp_path: Path) -> None:
    """A session with another ``spark.sql.shuffle.partitions`` runs the root with the
    recorded number (a change only on purpose); two engines with different numbers
    share one session; the session itself is left as it was."""
    inputs = tmp_path / "in"
    clicks.write_input(inputs, files=3, sessions_per_file=10, users=5, seed=2)

    def pipeline(name: str) -> Pipeline:
        return clickstream(str(inputs), str(tmp_path / name / "out"), str(tmp_path / name / "rej"))

    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert Engine(pipeline("a"), tmp_path / "a" / "state", spark=spark, parallelism=3).run(max_epochs=1).partitions == 3
    assert spark.conf.get("spark.sql.shuffle.partitions") == before, "the engine runs on a clone of the session"
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        again = Engine(pipeline("a"), tmp_path / "a" / "state", spark=spark).run(max_epochs=1)
        fresh = Engine(pipeline("b"), tmp_path / "b" / "state", spark=spark).run(max_epochs=1)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert (again.partitions, again.rescaled_from) == (3, None), "the recorded number, not the session's"
    assert fresh.partitions == 5, "a new root takes the session's number"
    with pytest.raises(GraphError, match="parallelism must be a positive integer"):
        Engine(pipeline("c"), tmp_path / "c" / "state", spark=spark, parallelism=0)
