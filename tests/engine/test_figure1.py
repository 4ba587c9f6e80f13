"""``examples/figure1.py``: the paper's Figure 1 with its four regimes (ephemeral,
batch, lazy checkpoint, eager sequence numbers) in one dataflow. Every output - the
responses, the statistics table and the dead-letter table - is compared, whole, with
a plain-Python computation of the same application (``falkirk.testing.figure1.expected``):
after an uninterrupted run, after SIGKILLs at crash points of each regime, and after
kills at random moments and during recovery. The regimes' explanations (what a
failure in each rolls back) are checked against the policies."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.figure1 import (
    REJECTED_COLUMNS,
    RESPONSE_COLUMNS,
    STATS_COLUMNS,
    build_pipeline,
    explain,
)
from falkirk.runtime import Engine
from falkirk.testing.figure1 import Expected, expected, write_input
from falkirk.testing.verify import differences
from falkirk.testing.visibility import CommittedOnly
from tests.engine.examples import kill_at_a_random_moment, kill_at_each
from tests.engine.examples import start as run_example

pytestmark = pytest.mark.slow
BATCH_EVERY = 2


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Expected]:
    root = tmp_path_factory.mktemp("figure1-input")
    links, queries = write_input(root, epochs=5, links=12, queries=6, vertices=20, seed=5)
    return links, queries, expected(str(links), str(queries), batch_every=BATCH_EVERY)


def args(inputs: tuple[Path, Path, Expected], work: Path) -> list[str]:
    return [
        "--links", str(inputs[0]), "--queries", str(inputs[1]), "--responses", str(work / "responses"),
        "--stats", str(work / "stats"), "--rejected", str(work / "rej"), "--storage", str(work / "state"),
        "--batch-every", str(BATCH_EVERY),
    ]  # fmt: skip


def start(inputs: tuple[Path, Path, Expected], work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    return run_example("figure1.py", args(inputs, work), crash)


def run_here(spark: object, inputs: tuple[Path, Path, Expected], work: Path) -> None:
    """The rest of the run in this process (no second JVM start)."""
    pipeline = build_pipeline(
        str(inputs[0]), str(inputs[1]), str(work / "responses"), str(work / "stats"), str(work / "rej"), batch_every=BATCH_EVERY
    )
    Engine(pipeline, work / "state", spark=spark).run()  # type: ignore[arg-type]


def check(work: Path, want: Expected) -> None:
    responses = pd.read_parquet(work / "responses")
    assert tuple(responses.columns) == (*RESPONSE_COLUMNS, "epoch")
    assert not responses.duplicated("qid").any(), "a query was answered twice"
    types = {"qid": "int64", "vertex": "int64", "bytes": "Int64", "component": "Int64", "asked": "int64", "epoch": "int64"}
    assert differences(responses.astype(types), want.responses, name="responses") == []
    stats = pd.read_parquet(work / "stats")
    assert tuple(stats.columns) == (*STATS_COLUMNS, "epoch")
    assert not stats.duplicated("seq").any(), "a statistic was recorded twice"
    assert differences(stats.astype("int64"), want.stats, name="stats") == []
    rejected = pd.read_parquet(work / "rej")
    assert tuple(rejected.columns) == REJECTED_COLUMNS and rejected["reason"].notna().all()
    assert differences(rejected[["source", "raw"]], want.rejected, name="rejected") == []


def test_an_uninterrupted_run_and_what_each_regime_rolls_back(spark, inputs: tuple[Path, Path, Expected], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    want = inputs[2]
    # a test that can fail: every kind of answer is there
    assert want.responses["bytes"].isna().any() and want.responses["bytes"].notna().any()
    assert want.responses["component"].isna().any() and (want.responses["asked"] > 1).any()
    assert set(want.rejected["source"]) == {"links", "queries"}
    run_here(spark, inputs, tmp_path)
    check(tmp_path, want)
    pipeline = build_pipeline(*(str(x) for x in inputs[:2]), "r", "s", "j", batch_every=BATCH_EVERY)
    said = explain(pipeline, tmp_path / "state")
    redo = {regime: _redone(lines) for regime, lines in said.items()}
    # ephemeral: nothing persisted, nothing lost: the failed steps re-run from live input
    assert set(redo["ephemeral"]) <= {"links", "link_lines", "check_links"} and not any(redo["ephemeral"].values())
    # batch: re-runs from its logged input history; everything else keeps its state
    assert "batch (replays its whole input history)" in "\n".join(said["batch"])
    assert "with_traffic" not in redo["batch"] and "propagate" not in redo["batch"]
    # lazy: checkpoints every 2 epochs, 5 epochs run: the loop re-does epoch 5, fed from
    # the log where the ephemeral regime ends, and so does what read its epoch 5 (the
    # queries' answers and their statistics); the batch side and the sources do not
    lazy = redo["lazy checkpoint"]
    assert lazy["propagate"] == 1 and lazy["arrivals"] == 1 and lazy["with_component"] == 1 and lazy["asked"] == 1
    assert not {"batch", "with_traffic", "undirected", "links", "queries"} & set(lazy)
    assert "  undirected.out>seeds re-sends its log of [(5, 0)]" in said["lazy checkpoint"]
    # eager: only the failed processor, from its last committed chunk; nothing re-done
    assert redo["eager (sequence numbers)"] == {"asked": 0}
    # the whole application: each regime as its policy says
    whole = redo["whole application (the driver dies)"]
    assert whole["propagate"] == 1 and whole["with_component"] == 1 and whole["with_traffic"] == 0 and whole["batch"] == 0


def _redone(lines: list[str]) -> dict[str, int]:
    """processor -> epochs it re-does, from :func:`explain`'s lines."""
    out = {}
    for line in lines[1:]:
        if " rolls back to " in line:
            name = line.split()[0]
            out[name] = int(line.split("re-doing ")[1].split(" ")[0])
    return out


#: A crash point of each regime's own work, each run killed at the next (the n-th
#: time that run reaches it, its recovery included): a committed chunk of the eager
#: region (mid epoch 2), the loop's epoch computed. (The generic points - planning, a
#: sink's file written, commit, garbage collection, a kill inside a recovery - are
#: killed at in the other examples' chains: each killed run is a driver start on CI's
#: clock.)
CHAIN = ["chunk.committed:3", "loop.computed:2"]


def test_killed_at_each_regimes_crash_points_and_at_a_random_moment(spark, inputs: tuple[Path, Path, Expected], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The chain; then a run killed at a random moment (it may finish before its
    moment comes on a fast machine); then the rest, in this process."""
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(inputs, tmp_path, crash=point), CHAIN, visible)
    kill_at_a_random_moment(start(inputs, tmp_path), random.Random(1).uniform(10.0, 25.0), visible)
    run_here(spark, inputs, tmp_path)
    check(tmp_path, inputs[2])
