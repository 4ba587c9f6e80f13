"""A restart whose pipeline changed a keyed processor (issue 29, finding 3).

Before, the restart read the stored state with the new pipeline: a sum of ``x``
continued as a sum of ``y``, a ``max`` over only the epochs after the restart, a new
aggregate over only those epochs - and nothing failed. Now a change that would make
the stored state mean something else is refused before any work, one line per
changed processor, and the root is left as it was; a policy change the state
survives is allowed and exact (whole outputs compared with pandas over the input).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import (
    EagerCheckpoint,
    FullHistory,
    GlobalCheckpoints,
    LazyCheckpoint,
    LogOutputs,
    Pipeline,
    PipelineChangedError,
    Policy,
    Stateless,
)
from falkirk.io import FileSource, MemorySink, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.storage import MetaStore

SCHEMA = "k string, j string, x long, y long"
AGGREGATES = {"n": ("count", None), "sx": ("sum", "x")}
LAZY = LazyCheckpoint(every=3)
GLOBAL = GlobalCheckpoints(every=2)


def add_files(directory: Path, numbers: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in numbers:
        rnd = random.Random(i)
        rows = [{"k": f"k{rnd.randrange(4)}", "j": f"j{rnd.randrange(2)}", "x": rnd.randrange(1000), "y": rnd.randrange(1000)} for _ in range(12)]
        (directory / f"f{i:02d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def expected(directory: Path, column: str = "x") -> list[tuple[str, int, int, int]]:
    """What ``stats`` emits over the files, computed in pandas: per epoch (one file
    each), every key of the epoch with its count and sum of ``column`` so far."""
    frames = [pd.read_json(f, lines=True).assign(epoch=e) for e, f in enumerate(sorted(directory.glob("*.json")), 1)]
    rows = pd.concat(frames)
    out = []
    for e in sorted(rows["epoch"].unique()):
        upto = rows[rows["epoch"] <= e]
        for k in sorted(rows[rows["epoch"] == e]["k"].unique()):
            mine = upto[upto["k"] == k]
            out.append((k, len(mine), int(mine[column].sum()), int(e)))
    return sorted(out)


def written(out: Path) -> list[tuple[str, int, int, int]]:
    """Every row the ``stats`` sink committed."""
    return sorted((r.k, int(r.n), int(r.sx), int(r.epoch)) for r in pd.read_parquet(out).itertuples())


def stats_only(directory: Path, out: Path, policy: Policy | GlobalCheckpoints, aggregates: dict[str, Any] = AGGREGATES) -> Pipeline:
    """Source -> exchange -> ``stats`` -> Parquet; ``policy`` may be global checkpoints."""
    glob = policy if isinstance(policy, GlobalCheckpoints) else None
    p = Pipeline("changes", checkpoints=glob)
    by_k = p.source("src", FileSource(str(directory), "json", SCHEMA)).exchange("by_k", "k")
    stats = by_k.aggregate("stats", "k", aggregates, policy=None if glob else policy)  # type: ignore[arg-type]
    stats.sink("out", ParquetTableSink(str(out)))
    return p


def tally(key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    total = int(rows["x"].sum()) + (int(state["total"].iloc[0]) if len(state) else 0)
    return pd.DataFrame({"k": [str(key)], "total": [total]}), pd.DataFrame({"total": [total]})


def every_kind(directory: Path, **change: Any) -> Pipeline:
    """Every kind of keyed processor, its state stored; ``change`` alters one part."""
    c: dict[str, Any] = {
        "aggregates": AGGREGATES, "stats_key": "k", "stats_policy": LAZY, "stats_kind": "aggregate",
        "tally_key": "k", "tally_state": "total long", "pairs_on": "k", "pairs_retain": None,
        "buffer": True, "buffer_retain": 2, "hist_policy": FullHistory(), "extra": False,
        "table": ["k", "y AS latest"],
    } | change
    p = Pipeline("changes")
    src = p.source("src", FileSource(str(directory), "json", SCHEMA))
    by_k = src.exchange("by_k", "k")
    if c["stats_kind"] == "aggregate":
        stats = by_k.aggregate("stats", c["stats_key"], c["aggregates"], policy=c["stats_policy"])
    else:
        stats = by_k.stateful("stats", "k", tally, state_schema="total long", output_schema="k string, total long", policy=LAZY)
    stats.sink("stats_out", MemorySink())
    counted = src.stateful("tally", c["tally_key"], tally, state_schema=c["tally_state"], output_schema="k string, total long", policy=LAZY)
    counted.sink("tally_out", MemorySink())
    right_columns = ["k", "y"] if c["pairs_on"] == "k" else ["k", "j", "y"]
    left = src.map("left", lambda df: df.select("k", "j", "x"))
    right = src.map("right", lambda df: df.select(*right_columns))
    left.join("pairs", right, c["pairs_on"], retain=c["pairs_retain"], policy=LAZY).sink("pairs_out", MemorySink())
    table = src.map("table", lambda df: df.selectExpr(*c["table"]))
    src.map("probe", lambda df: df.select("k", "x")).lookup("look", table, "k", policy=LAZY).sink("look_out", MemorySink())
    if c["buffer"]:
        src.buffer("buf", retain=c["buffer_retain"], policy=LAZY).sink("buf_out", MemorySink())
    by_k.aggregate("hist", "k", {"m": ("max", "x")}, policy=c["hist_policy"]).sink("hist_out", MemorySink())
    if c["extra"]:
        by_k.aggregate("extra", "k", {"m": ("min", "y")}, policy=LAZY).sink("extra_out", MemorySink())
    return p


@pytest.fixture(scope="module")
def committed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A root that committed 3 epochs of :func:`every_kind` (checkpoints at 3, the
    FullHistory input log): its input directory and the root."""
    work = tmp_path_factory.mktemp("changes")
    add_files(work / "in", range(1, 4))
    assert Engine(every_kind(work / "in"), work / "state", spark=spark).run().epochs == [1, 2, 3]
    return work / "in", work / "state"


SUM_Y = {"n": ("count", None), "sx": ("sum", "y")}
STATS = "processor 'stats' (aggregate): "
REFUSED: dict[str, tuple[dict[str, Any], list[str]]] = {
    "sum-of-x-to-sum-of-y": ({"aggregates": SUM_Y}, [STATS + "aggregate 'sx' was sum of 'x', is now sum of 'y'"]),
    "sum-to-max": ({"aggregates": {"n": ("count", None), "sx": ("max", "x")}}, [STATS + "aggregate 'sx' was sum of 'x', is now max of 'x'"]),
    "new-aggregate": ({"aggregates": {**AGGREGATES, "sy": ("sum", "y")}}, [STATS + "aggregate 'sy' (sum of 'y') is new"]),
    "aggregate-keys": ({"stats_key": ["k", "j"]}, [STATS + "key columns were ['k'], are now ['k', 'j']"]),
    "stateful-state-schema": ({"tally_state": "total long, seen long"}, ["processor 'tally' (stateful): state column 'seen' (bigint) is new"]),
    "stateful-keys": ({"tally_key": "j"}, ["processor 'tally' (stateful): key columns were ['k'], are now ['j']"]),
    "join-keys": ({"pairs_on": ["k", "j"]}, ["processor 'pairs' (join): key columns were ['k'], are now ['k', 'j']"]),
    "join-retention": ({"pairs_retain": 3}, ["processor 'pairs' (join): setting 'retain' was None, is now 3"]),
    "lookup-table": ({"table": ["k", "y AS latest", "j"]}, ["processor 'look' (lookup): state column 'j' (string) is new"]),
    "buffer-retention": ({"buffer_retain": 3}, ["processor 'buf' (buffer): setting 'retain' was 2, is now 3"]),
    "kind": ({"stats_kind": "stateful"}, ["processor 'stats' (stateful): kind was aggregate, is now stateful"]),
    "keyed-processor-added": ({"extra": True}, ["processor 'extra' (aggregate): is new"]),
    "keyed-processor-removed": ({"buffer": False}, ["processor 'buf' (buffer): was removed"]),
    "to-full-history": (
        {"stats_policy": FullHistory()},
        [STATS + "policy was LazyCheckpoint, is now FullHistory: FullHistory rebuilds the state by replaying every "
         "input since epoch 1, which this root did not keep (it holds checkpoints of the state)"],
    ),
    "from-full-history-to-lazy": (
        {"hist_policy": LAZY},
        ["processor 'hist' (aggregate): policy was FullHistory, is now LazyCheckpoint: this root holds the state only "
         "as a log of every input since epoch 1 (FullHistory's), which LazyCheckpoint does not replay"],
    ),
    "from-full-history-to-logged": ({"hist_policy": LogOutputs()}, ["processor 'hist' (aggregate): policy was FullHistory, is now LogOutputs"]),
    "two-processors": (
        {"aggregates": SUM_Y, "tally_state": "total long, seen long"},
        [STATS + "aggregate 'sx' was sum of 'x', is now sum of 'y'", "processor 'tally' (stateful): state column 'seen'"],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_changed_keyed_processor_is_refused_before_any_work(
    spark: SparkSession, committed: tuple[Path, Path], tmp_path: Path, case: str
) -> None:
    directory, original = committed
    root = tmp_path / "state"
    shutil.copytree(original, root)
    description = MetaStore(root, read_only=True).description()
    change, lines = REFUSED[case]
    with pytest.raises(PipelineChangedError) as refused:
        Engine(every_kind(directory, **change), root, spark=spark).run()
    message = str(refused.value)
    if len(lines) == 1:  # one changed processor: one line
        assert len(message.splitlines()) == 1 and f"something else: {lines[0]}" in message, message
    else:  # one line per changed processor
        named = [line.strip() for line in message.splitlines() if line.strip().startswith("processor ")]
        assert len(named) == len(lines), message
        for line in lines:
            assert any(n.startswith(line) for n in named), message
    assert "Run the pipeline as it was; or, to change it, run it as it was to a clean stop with a savepoint" in message
    assert "Engine(..., upgrade=True)" in message
    assert MetaStore(root, read_only=True).description() == description  # nothing recorded


def test_a_refused_start_leaves_the_root_to_finish_exactly(spark: SparkSession, tmp_path: Path) -> None:
    """The reviewer's case: 4 files, stop, 3 more, restart with ``sx`` the sum of
    ``y`` - refused; the pipeline as it was then finishes with every row exact."""
    directory, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "state"
    add_files(directory, range(1, 5))
    Engine(stats_only(directory, out, LAZY), root, spark=spark).run()
    add_files(directory, range(5, 8))
    with pytest.raises(PipelineChangedError, match="aggregate 'sx' was sum of 'x', is now sum of 'y'"):
        Engine(stats_only(directory, out, LAZY, SUM_Y), root, spark=spark).run()
    assert Engine(stats_only(directory, out, LAZY), root, spark=spark).run().epochs == [4, 5, 6, 7]
    assert written(out) == expected(directory)


def test_a_root_without_recorded_signatures_refuses_a_changed_state_layout(spark: SparkSession, tmp_path: Path) -> None:
    """A root written before signatures were recorded (its description has no
    ``state``): the restore compares the checkpoint files' own columns with the
    state's, so ``sx`` turned from a sum into a max is refused, not continued from
    nulls; nothing is recorded, and the pipeline as it was finishes exactly."""
    directory, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "state"
    add_files(directory, range(1, 5))
    Engine(stats_only(directory, out, LAZY), root, spark=spark).run()
    store = MetaStore(root)
    description = store.description()
    assert description is not None
    for processor in description["processors"].values():
        processor.pop("state", None)
    store.describe("changes", description)
    store.close()
    add_files(directory, range(5, 8))
    with pytest.raises(PipelineChangedError, match=r"processor 'stats' \(aggregate\): the rows stored in .* column 'sx__max' \(bigint\) is not in it"):
        Engine(stats_only(directory, out, LAZY, {"n": ("count", None), "sx": ("max", "x")}), root, spark=spark).run()
    assert MetaStore(root, read_only=True).description() == description  # nothing recorded
    assert Engine(stats_only(directory, out, LAZY), root, spark=spark).run().epochs == [4, 5, 6, 7]
    assert written(out) == expected(directory)


def test_a_root_with_nothing_committed_may_change_anything(spark: SparkSession, tmp_path: Path) -> None:
    directory, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "state"
    add_files(directory, range(1, 4))
    Engine(stats_only(directory, out, FullHistory()), root, spark=spark).run(max_epochs=0)
    assert not MetaStore(root, read_only=True).has_commits()
    Engine(stats_only(directory, out, LAZY, SUM_Y), root, spark=spark).run()
    assert written(out) == expected(directory, "y")


#: Policies one restart after another (3 files, then 2 more per restart): each move
#: keeps the state, and every row written is exact.
ALLOWED: dict[str, list[Policy | GlobalCheckpoints]] = {
    "logged-lazy-every-lazy-eager-lazy": [LogOutputs(), LazyCheckpoint(every=2), LAZY, EagerCheckpoint(), LAZY],
    "to-global-checkpoints-and-back": [LAZY, GLOBAL, LAZY],
    "checkpoints-to-logged": [EagerCheckpoint(), LogOutputs()],
    "stateless-to-full-history": [Stateless(), FullHistory()],
}


@pytest.mark.parametrize("chain", sorted(ALLOWED))
def test_a_policy_change_the_state_survives_is_allowed_and_exact(spark: SparkSession, tmp_path: Path, chain: str) -> None:
    directory, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "state"
    last = 0
    for n, policy in enumerate(ALLOWED[chain]):
        new = 3 if n == 0 else 2
        add_files(directory, range(last + 1, last + new + 1))
        last += new
        Engine(stats_only(directory, out, policy), root, spark=spark).run()
        assert written(out) == expected(directory), policy


def two_keyed(directory: Path, out: Path, totals: Path, stats: Policy | GlobalCheckpoints, tot: Policy | None) -> Pipeline:
    """``stats`` as in :func:`stats_only`, then ``tot``: per key, the greatest ``sx``
    ``stats`` emitted and how many epochs emitted it (each with its own policy, or
    both under global checkpoints)."""
    glob = stats if isinstance(stats, GlobalCheckpoints) else None
    p = Pipeline("changes", checkpoints=glob)
    by_k = p.source("src", FileSource(str(directory), "json", SCHEMA)).exchange("by_k", "k")
    emitted = by_k.aggregate("stats", "k", AGGREGATES, policy=None if glob else stats)  # type: ignore[arg-type]
    emitted.sink("out", ParquetTableSink(str(out)))
    tot_aggregates = {"m": ("max", "sx"), "c": ("count", None)}
    emitted.map("keep", lambda df: df.select("k", "sx")).aggregate("tot", "k", tot_aggregates, policy=tot).sink(
        "totals", ParquetTableSink(str(totals))
    )
    return p


def test_processors_at_different_restore_points_move_to_global_checkpoints_and_back(spark: SparkSession, tmp_path: Path) -> None:
    """``stats`` checkpoints every epoch, ``tot`` every third: after 5 epochs they
    stand at 5 and 3. Under global checkpoints the restart runs epochs 4-5 for
    ``tot`` alone, so no barrier may fall there; the first follows epoch 5. Both
    sinks exact after each move."""
    directory, out, totals, root = tmp_path / "in", tmp_path / "out", tmp_path / "totals", tmp_path / "state"
    moves: list[tuple[Policy | GlobalCheckpoints, Policy | None]] = [
        (EagerCheckpoint(), LAZY), (GLOBAL, None), (EagerCheckpoint(), LAZY)
    ]
    for n, (stats, tot) in enumerate(moves):
        add_files(directory, range(1, 6) if n == 0 else range(4 + 2 * n, 6 + 2 * n))
        Engine(two_keyed(directory, out, totals, stats, tot), root, spark=spark).run()
        assert written(out) == expected(directory), n
        greatest: dict[str, int] = {}
        seen: dict[str, int] = {}
        want = []
        for k, _, sx, epoch in sorted(expected(directory), key=lambda row: row[3]):
            greatest[k] = max(greatest.get(k, sx), sx)
            seen[k] = seen.get(k, 0) + 1
            want.append((k, greatest[k], seen[k], epoch))
        got = sorted((r.k, int(r.m), int(r.c), int(r.epoch)) for r in pd.read_parquet(totals).itertuples())
        assert got == sorted(want), n


def test_a_changed_column_type_upstream_of_an_input_log_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    """FullHistory's state is the log of its input: ``x`` cast to int upstream would
    be replayed from a log of bigints. Refused, naming the column; nothing recorded."""
    directory, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "state"

    def pipeline(cast: bool) -> Pipeline:
        p = Pipeline("changes")
        rows = p.source("src", FileSource(str(directory), "json", SCHEMA))
        rows = rows.map("typed", (lambda df: df.withColumn("x", df.x.cast("int"))) if cast else (lambda df: df))
        rows.exchange("by_k", "k").aggregate("stats", "k", AGGREGATES, policy=FullHistory()).sink("out", ParquetTableSink(str(out)))
        return p

    add_files(directory, range(1, 4))
    Engine(pipeline(cast=False), root, spark=spark).run()
    description = MetaStore(root, read_only=True).description()
    add_files(directory, range(4, 6))
    with pytest.raises(PipelineChangedError, match=r"column 'x' is bigint there, int now"):
        Engine(pipeline(cast=True), root, spark=spark).run()
    assert MetaStore(root, read_only=True).description() == description
    assert Engine(pipeline(cast=False), root, spark=spark).run().epochs == [4, 5]
    assert written(out) == expected(directory)
