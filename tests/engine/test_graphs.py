"""General graphs in the engine: several sources (one with fewer files), fan-out, a
union and joins, recovered after a restart and after an in-process failure, with the
whole output compared to an uninterrupted run; and the rollback a join with
differently persisted sides needs, as the paper's constraints require it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import (
    EagerCheckpoint,
    FullHistory,
    LazyCheckpoint,
    LogOutputs,
    Pipeline,
    Stateless,
)
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.testing.verify import differences

pytestmark = pytest.mark.slow


def write(directory: Path, epochs: list[list[tuple[str, int]]], column: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for e, rows in enumerate(epochs):
        pd.DataFrame(rows, columns=["k", column]).astype({column: "int64"}).to_parquet(directory / f"{e:03d}.parquet")


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sides")
    write(root / "a", [[("x", 1), ("y", 2)], [("x", 3)], [("z", 4), ("y", 5)], [("x", 6)], [("w", 7)]], "v")
    write(root / "b", [[("y", 10)], [("x", 20), ("z", 30)], [("x", 40)]], "w")  # fewer files
    return root


def graph(root: Path, work: Path, join_policy=None) -> Pipeline:  # type: ignore[no-untyped-def]
    p = Pipeline("graph")
    a = p.source("a", FileSource(str(root / "a"), "parquet", "k string, v long"))
    b = p.source("b", FileSource(str(root / "b"), "parquet", "k string, w long"))
    a_rows = a.map("a_rows", lambda df: df.selectExpr("k", "v AS n"))  # a is read twice: fan-out
    b_rows = b.map("b_rows", lambda df: df.selectExpr("k", "w AS n"))
    counts = a_rows.union("both", b_rows).aggregate(
        "counts", "k", {"rows": ("count", None), "total": ("sum", "n")}, policy=LazyCheckpoint(every=2)
    )
    counts.sink("counts_out", ParquetTableSink(str(work / "counts")))
    a.join("pairs", b, "k", how="full", retain=2, policy=join_policy or EagerCheckpoint()).sink(
        "pairs_out", ParquetTableSink(str(work / "pairs"))
    )
    return p


def outputs(work: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(work / name) for name in ("counts", "pairs")}


@pytest.fixture(scope="module")
def uninterrupted(spark: SparkSession, sides: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    work = tmp_path_factory.mktemp("uninterrupted")
    report = Engine(graph(sides, work), work / "state", spark=spark).run()
    assert report.epochs == [1, 2, 3, 4, 5]  # b has 3 files: it contributes nothing to 4 and 5
    return outputs(work)


def test_uninterrupted_run_has_the_expected_joined_pairs(uninterrupted: dict[str, pd.DataFrame]) -> None:
    # A full join with retain=2 pairs rows that arrived at most one epoch apart, in the
    # later one's epoch; y of epoch 3 met no b row in epochs 2-4 and is emitted alone
    # in epoch 4, the last it waited; w of epoch 5 would be in epoch 6, which no input makes.
    want = pd.DataFrame(
        [("y", 2, 10, 1), ("x", 1, 20, 2), ("x", 3, 20, 2), ("x", 3, 40, 3), ("z", 4, 30, 3),
         ("x", 6, 40, 4), ("y", 5, None, 4)],
        columns=["k", "v", "w", "epoch"],
    )
    assert differences(uninterrupted["pairs"], want) == []
    counts = uninterrupted["counts"]
    assert counts[(counts["k"] == "x") & (counts["epoch"] == 4)][["rows", "total"]].values.tolist() == [[5, 70]]


@pytest.mark.parametrize(
    "join_policy",
    [EagerCheckpoint(), LazyCheckpoint(every=2), LogOutputs(), FullHistory(), Stateless()],
    ids=lambda p: p.name,
)
def test_restart_recovers_the_whole_output(spark: SparkSession, sides: Path, tmp_path: Path, uninterrupted: dict[str, pd.DataFrame], join_policy) -> None:  # type: ignore[no-untyped-def]
    Engine(graph(sides, tmp_path, join_policy), tmp_path / "state", spark=spark).run(max_epochs=3)
    Engine(graph(sides, tmp_path, join_policy), tmp_path / "state", spark=spark).run()
    for name, want in uninterrupted.items():
        assert differences(outputs(tmp_path)[name], want, name=name) == []


def test_in_process_failure_of_the_join_recovers_the_whole_output(spark: SparkSession, sides: Path, tmp_path: Path, uninterrupted: dict[str, pd.DataFrame]) -> None:
    engine = Engine(graph(sides, tmp_path, LazyCheckpoint(every=2)), tmp_path / "state", spark=spark, max_in_flight=1)

    def on_epoch(epoch: int, _: float, report) -> None:  # type: ignore[no-untyped-def]
        if epoch == 3 and not report.partial:
            engine.fail("pairs")

    engine.on_epoch = on_epoch
    report = engine.run()
    failed, at, chosen = report.partial[0]
    assert failed == {"pairs"} and at == 3
    # The join goes back to its checkpoint (2); its sources log nothing, so they re-send
    # epoch 3 on every edge - fan-out included - and the other branch, which received
    # epoch 3 from them, goes back too: to its own checkpoint at 2 (constraint 2).
    assert chosen["pairs"] == 2 and chosen["a"] == 2 and chosen["b"] == 2 and chosen["counts"] == 2
    for name, want in uninterrupted.items():
        assert differences(outputs(tmp_path)[name], want, name=name) == []


def test_a_join_of_a_logged_side_and_a_lazily_checkpointed_side(spark: SparkSession, sides: Path, tmp_path: Path) -> None:
    """Left side logs its outputs, right side checkpoints every 2 epochs, the join is
    eagerly checkpointed. After a crash following epoch 3: the right side can only go
    back to 2 and it discards what it sent, so the join must go back to 2 as well
    (constraint 2: it delivered the right side's epoch 3, which the rollback undoes);
    the left side keeps 3 and re-sends its logged epoch 3 (constraint 1 holds: it
    discarded nothing); the sink that received the join's epoch 3 goes back to 2."""

    def build(work: Path) -> Pipeline:
        p = Pipeline("two_policies")
        a = p.source("a", FileSource(str(sides / "a"), "parquet", "k string, v long"))
        b = p.source("b", FileSource(str(sides / "b"), "parquet", "k string, w long"))
        left = a.map("left_log", lambda df: df, policy=LogOutputs())
        right = b.aggregate("right_totals", "k", {"w": ("sum", "w")}, policy=LazyCheckpoint(every=2))
        left.join("j", right, "k", policy=EagerCheckpoint()).sink("out", ParquetTableSink(str(work / "out")))
        return p

    Engine(build(tmp_path / "whole"), tmp_path / "whole" / "state", spark=spark).run()
    Engine(build(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)
    report = Engine(build(tmp_path), tmp_path / "state", spark=spark).run()
    assert report.recovered == {"a": 3, "b": 2, "left_log": 3, "right_totals": 2, "j": 2, "out": 2}
    assert report.resent == {"left_log.out>j": [3]}
    assert "delivered" in report.recovery_reasons["j"] and "right_totals" in report.recovery_reasons["j"]
    assert differences(pd.read_parquet(tmp_path / "out"), pd.read_parquet(tmp_path / "whole" / "out")) == []


def lookups(root: Path, work: Path, policy) -> Pipeline:  # type: ignore[no-untyped-def]
    """Queries (a) looking up a table that b's running totals maintain."""
    p = Pipeline("lookups")
    a = p.source("a", FileSource(str(root / "a"), "parquet", "k string, v long"))
    b = p.source("b", FileSource(str(root / "b"), "parquet", "k string, w long"))
    table = b.aggregate("totals", "k", {"total": ("sum", "w")}, policy=LazyCheckpoint(every=2))
    a.lookup("answers", table, "k", policy=policy).sink("out", ParquetTableSink(str(work / "out")))
    return p


@pytest.mark.parametrize("policy", [LazyCheckpoint(every=2), EagerCheckpoint(), FullHistory()], ids=lambda p: p.name)
def test_lookup_sees_each_epochs_table_and_recovers(spark: SparkSession, sides: Path, tmp_path: Path, policy) -> None:  # type: ignore[no-untyped-def]
    Engine(lookups(sides, tmp_path / "whole", policy), tmp_path / "whole" / "state", spark=spark).run()
    want = pd.DataFrame(
        # b's totals: y=10 (1); x=20, z=30 (2); x=60 (3). A query sees its epoch's version.
        [("x", 1, None, 1), ("y", 2, 10, 1), ("x", 3, 20, 2), ("z", 4, 30, 3), ("y", 5, 10, 3), ("x", 6, 60, 4), ("w", 7, None, 5)],
        columns=["k", "v", "total", "epoch"],
    )
    assert differences(pd.read_parquet(tmp_path / "whole" / "out"), want) == []
    Engine(lookups(sides, tmp_path, policy), tmp_path / "state", spark=spark).run(max_epochs=3)
    Engine(lookups(sides, tmp_path, policy), tmp_path / "state", spark=spark).run()
    assert differences(pd.read_parquet(tmp_path / "out"), want) == []
