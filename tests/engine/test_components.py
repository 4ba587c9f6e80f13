"""``falkirk.demo.components`` in-process, on inputs at the edges of its contract: ids
up to 2^63 - 1 next to self-loops (a long column must never pass through floats),
files without a header or with lone-CR line ends (no line is dropped unseen), and a
path longer than the iteration limit (an error, not components that are not final).
Each run's whole output and dead-letter table is compared with the plain-Python
union-find reference."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.components import build_pipeline
from falkirk.graph import GraphError
from falkirk.runtime import Engine
from falkirk.testing.components import expected
from falkirk.testing.verify import differences


def run(spark, edges: Path, work: Path, **kw: int) -> None:  # type: ignore[no-untyped-def]
    Engine(build_pipeline(str(edges), str(work / "out"), str(work / "rej"), **kw), work / "state", spark=spark).run()


def assert_exact(edges: Path, work: Path) -> None:
    want = expected(str(edges))
    assert differences(pd.read_parquet(work / "out"), want.output, name="output") == []
    assert differences(pd.read_parquet(work / "rej")[["raw"]], want.rejected, name="rejected") == []


def test_the_largest_ids_keep_every_digit(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edges = tmp_path / "edges"
    edges.mkdir()
    big = 2**63 - 1
    rows = [f"{big},{big}", f"{big},{big - 1}", "9007199254740993,9007199254740993", "9007199254740993,9007199254740995"]
    rows += [f"{v},{v}" for v in range(5, 12)]  # self-loops in every partition
    (edges / "e1.csv").write_text("src,dst\n" + "\n".join(rows) + "\n")
    run(spark, edges, tmp_path)
    assert_exact(edges, tmp_path)
    out = pd.read_parquet(tmp_path / "out")
    assert out.loc[out["vertex"] == big, "component"].tolist() == [big - 1]
    assert out.loc[out["vertex"] == 9007199254740995, "component"].tolist() == [9007199254740993]


def test_no_line_is_dropped_unseen(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edges = tmp_path / "edges"
    edges.mkdir()
    (edges / "a.csv").write_text("20,21\n21,22\n")  # no header: its first line is an edge
    (edges / "b.csv").write_bytes(b"src,dst\r30,31\r31,32\r")  # lone CR line ends
    (edges / "c.csv").write_bytes("\ufeffSRC,dst \r\n1,2\r\na,b\r\n".encode())  # BOM, case, CRLF
    run(spark, edges, tmp_path)
    assert_exact(edges, tmp_path)
    out = pd.read_parquet(tmp_path / "out")
    assert {20, 21, 22, 30, 31, 32, 1, 2} == set(out["vertex"])
    assert pd.read_parquet(tmp_path / "rej")["raw"].tolist() == ["a,b"]


def test_a_path_longer_than_the_iteration_limit_stops_with_an_error(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edges = tmp_path / "edges"
    edges.mkdir()
    (edges / "e1.csv").write_text("src,dst\n" + "\n".join(f"{v},{v + 1}" for v in range(9, 0, -1)) + "\n")
    with pytest.raises(GraphError, match="max_iterations=3 in epoch 1"):
        run(spark, edges, tmp_path, max_iterations=3)
    assert not (tmp_path / "out").exists() or pd.read_parquet(tmp_path / "out").empty


def test_an_executor_lost_in_a_loop_s_stage_is_recovered_in_the_same_driver(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The blocks of the loop's state vanish (as when their executor dies) after the
    third iteration of an epoch committed, in the loop's stage, outside an epoch's
    computation: the next iteration fails, and the engine recovers in this process
    from the committed metadata, as a restart would, with the exact output."""
    from falkirk.execution import commits as commits_module
    from falkirk.spark.blocks import checkpointed_rdds, lost_blocks

    edges = tmp_path / "edges"
    edges.mkdir()
    (edges / "e1.csv").write_text("src,dst\n" + "\n".join(f"{v},{v + 1}" for v in range(30, 42)) + "\n")
    (edges / "e2.csv").write_text("src,dst\n" + "\n".join(f"{v},{v + 1}" for v in range(41, 50)) + "\n")
    running = Engine(build_pipeline(str(edges), str(tmp_path / "out"), str(tmp_path / "rej")), tmp_path / "state", spark=spark)
    seen = {"iterations": 0}
    original = commits_module.crash_point

    def losing(point: str) -> None:
        original(point)
        if point == "iteration.committed":
            seen["iterations"] += 1
            if seen["iterations"] == 3:
                held = running.state.operators["propagate"].held() or []
                for df in held:
                    for rdd in checkpointed_rdds(df):
                        rdd.unpersist(True)  # the block manager master forgets them, as on a loss
                assert lost_blocks(spark, held)

    monkeypatch.setattr(commits_module, "crash_point", losing)  # where iterations commit
    report = running.run()
    assert seen["iterations"] > 3 and report.restarts_in_process == 1
    assert_exact(edges, tmp_path)
