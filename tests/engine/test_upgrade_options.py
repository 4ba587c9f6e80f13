"""Every option of an upgrade, end to end (issue 34, item 2): ``Upgrade(renamed=,
drop=, defaults=, initial_state=, start_sources=)``.

Version 1 (two epochs, then a savepoint): ``totals`` (count and sum per user), and
``biggest`` (max per user). Version 2 starts from the savepoint: ``totals`` renamed
``sums`` with a new aggregate ``low`` (the least amount, 1000 for the users the
savepoint holds: its default); ``biggest`` dropped; a new ``stateful`` processor
``seen`` started from a given state; a new source ``bonus`` read from its
beginning. Its two epochs' whole output is compared with plain Python; without
``drop=`` and without ``start_sources=`` the upgrade is refused, naming the
processor and what to do, and the root is left as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import FileSource, MemorySink
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.upgrades.savepoints import SavepointError
from falkirk.upgrades.upgrade import Upgrade, UpgradeError

pytestmark = pytest.mark.slow

SCHEMA = "user string, amount long"
EAGER = EagerCheckpoint()
SEEN_START = {"ann": 100, "zed": 7}  # the given state of ``seen``: rows seen per user


def write(directory: Path, epoch: int, rows: list[tuple[str, int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"f{epoch:03d}.csv").write_text("user,amount\n" + "".join(f"{u},{a}\n" for u, a in rows))


INPUT = {
    1: [("ann", 5), ("bob", 7)],
    2: [("ann", 11), ("cat", 2)],
    3: [("bob", 3), ("ann", 20)],
    4: [("cat", 40), ("dan", 1)],
}
BONUS = {1: [("ann", 1000)], 2: [("bob", 2000)]}  # the new source's files: epochs 3 and 4 read them


def count_seen(key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(rows) + (int(state["n"].iloc[0]) if len(state) else 0)
    return pd.DataFrame({"user": [str(key)], "n": [n]}), pd.DataFrame({"n": [n]})


def csv(directory: Path) -> FileSource:
    return FileSource(str(directory), "csv", SCHEMA, options={"header": "true"})


def version_1(work: Path, sinks: dict[str, MemorySink]) -> Pipeline:
    p = Pipeline("options")
    rows = p.source("payments", csv(work / "in"))
    rows.aggregate("totals", "user", {"n": ("count", None), "total": ("sum", "amount")}, policy=EAGER).sink("totals_out", sinks["totals"])
    rows.aggregate("biggest", "user", {"top": ("max", "amount")}, policy=EAGER).sink("biggest_out", sinks["biggest"])
    return p


def version_2(work: Path, sinks: dict[str, MemorySink]) -> Pipeline:
    p = Pipeline("options")
    rows = p.source("payments", csv(work / "in"))
    bonus = p.source("bonus", csv(work / "bonus"))
    both = rows.union("all_rows", bonus)
    aggregates = {"n": ("count", None), "total": ("sum", "amount"), "low": ("min", "amount")}
    both.aggregate("sums", "user", aggregates, policy=EAGER).sink("totals_out", sinks["totals"])
    both.stateful("seen", "user", count_seen, state_schema="n long", output_schema="user string, n long", policy=EAGER).sink(
        "seen_out", sinks["seen"]
    )
    return p


def emitted(sink: MemorySink, *columns: str) -> list[tuple[Any, ...]]:
    return sorted((e, *(r[c] for c in columns)) for e, rows in sink.epochs.items() for r in rows)


def test_renamed_dropped_defaults_initial_state_and_a_new_source(spark: SparkSession, tmp_path: Path) -> None:
    sinks = {name: MemorySink() for name in ("totals", "biggest", "seen")}
    for e in (1, 2):
        write(tmp_path / "in", e, INPUT[e])
    first = Engine(version_1(tmp_path, sinks), tmp_path / "state", spark=spark).run(savepoint="v1")
    assert first.epochs == [1, 2]
    for e in (3, 4):
        write(tmp_path / "in", e, INPUT[e])
    for b, rows in BONUS.items():
        write(tmp_path / "bonus", b, rows)
    given = spark.createDataFrame([(u, n) for u, n in SEEN_START.items()], "user string, n long")

    def upgrade(**options: Any) -> Engine:
        base: dict[str, Any] = {"renamed": {"totals": "sums"}, "drop": ["biggest"], "defaults": {"sums": {"low": 1000}},
                                "initial_state": {"seen": given}, "start_sources": ["bonus"]}  # fmt: skip
        return Engine(version_2(tmp_path, sinks), tmp_path / "state", spark=spark, upgrade=Upgrade(**(base | options)))

    with pytest.raises(UpgradeError, match=r"processor 'biggest' \(aggregate\) was removed: its state would be lost; say so with drop=\['biggest'\]"):
        upgrade(drop=[]).run()
    with pytest.raises(UpgradeError, match="bonus"):
        upgrade(start_sources=[]).run()
    store = MetaStore(tmp_path / "state", read_only=True)
    try:
        assert store.committed_epoch() == 2, "a refused upgrade leaves the root as it was"
    finally:
        store.close()

    second = upgrade().run()
    assert second.epochs == [3, 4] and second.upgraded_from == "v1"

    # Plain Python: per epoch, the users changed and their values so far.
    epochs = {e: list(INPUT[e]) + (BONUS.get(e - 2, []) if e >= 3 else []) for e in INPUT}
    totals, lows, seen = {}, {}, dict(SEEN_START)
    want_totals, want_seen = [], []
    for e in sorted(epochs):
        for user, amount in epochs[e]:
            n, t = totals.get(user, (0, 0))
            totals[user] = (n + 1, t + amount)
            if e >= 3:
                before = lows.get(user, 1000 if user in {"ann", "bob", "cat"} else None)  # the savepoint's users: the default
                lows[user] = amount if before is None else min(before, amount)
                seen[user] = seen.get(user, 0) + 1
        for user in sorted({u for u, _ in epochs[e]}):
            want_totals.append((e, user, *totals[user]) + ((lows[user],) if e >= 3 else ()))
            if e >= 3:
                want_seen.append((e, user, seen[user]))
    assert emitted(sinks["totals"], "user", "n", "total") == sorted(t[:4] for t in want_totals)
    assert sorted((e, r["user"], r["low"]) for e, rows in sinks["totals"].epochs.items() if e >= 3 for r in rows) == sorted(
        (t[0], t[1], t[4]) for t in want_totals if t[0] >= 3
    )
    assert emitted(sinks["seen"], "user", "n") == sorted(want_seen)


def test_a_new_root_from_a_savepoint_never_writes_over_the_old_roots_later_epochs(spark: SparkSession, tmp_path: Path) -> None:
    """Root ``a`` takes a savepoint at epoch 2 and runs on to 4; a new root started
    from that savepoint with the same tables would write epochs 3 and 4 over ``a``'s
    committed ones: refused, naming the table, its epochs and what to do. With new
    tables it starts and continues exactly where the savepoint stopped."""
    from falkirk.demo.upgrade import build_pipeline
    from falkirk.testing.upgrade import expected, read_input, write_input

    inputs = tmp_path / "in"
    write_input(inputs, range(1, 3), seed=4)
    assert Engine(build_pipeline(str(inputs), str(tmp_path / "out"), 1), tmp_path / "a", spark=spark).run(savepoint="at-2").savepoint == "at-2"
    write_input(inputs, range(3, 5), seed=4)
    assert Engine(build_pipeline(str(inputs), str(tmp_path / "out"), 1), tmp_path / "a", spark=spark).run().epochs == [1, 2, 3, 4]
    import shutil

    shutil.copytree(tmp_path / "a" / "savepoints" / "at-2", tmp_path / "b" / "savepoints" / "at-2")
    with pytest.raises(UpgradeError, match=r"sink 'totals_out': its table .*/out/totals holds epochs 3-4, after savepoint 'at-2''s epoch 2"):
        Engine(build_pipeline(str(inputs), str(tmp_path / "out"), 1), tmp_path / "b", spark=spark, from_savepoint="at-2").run()
    fresh = Engine(build_pipeline(str(inputs), str(tmp_path / "out-b"), 2), tmp_path / "b", spark=spark, from_savepoint="at-2").run()
    assert fresh.epochs == [3, 4] and fresh.upgraded_from == "at-2"
    totals = pd.read_parquet(tmp_path / "out-b" / "totals")
    want = [t for t in expected(read_input(inputs), upgraded_after=2).totals if t[1] >= 3]
    assert sorted(map(tuple, totals[["user", "epoch", "n", "total", "max_amount"]].values.tolist())) == want


def test_refusals_name_only_their_reasons_and_a_taken_savepoint_name_is_refused_first(spark: SparkSession, tmp_path: Path) -> None:
    """A changed aggregate is refused for that change alone (it is not also "removed",
    with a drop= that would lose its state); a keyed processor turned into a
    stateless one is refused (its state would be lost silently); a settings-only
    upgrade says what changed in the history; and a savepoint name already taken is
    refused before any epoch runs, leaving that savepoint's files as they were."""
    for e in (1, 2):
        write(tmp_path / "in", e, INPUT[e])

    def pipeline(kind: str, ttl: int | None = None) -> Pipeline:
        p = Pipeline("refusals")
        rows = p.source("payments", csv(tmp_path / "in")).exchange("by_user", "user")
        if kind == "map":
            agg = rows.map("totals", lambda df: df)
        else:
            agg = rows.aggregate("totals", "user", {"n": ("count", None), "total": (kind, "amount")}, policy=EAGER, ttl=ttl)
        agg.sink("out", MemorySink())
        return p

    Engine(pipeline("sum"), tmp_path / "state", spark=spark).run(savepoint="v1")
    saved = sorted(p.relative_to(tmp_path) for p in (tmp_path / "state" / "savepoints").rglob("*"))
    with pytest.raises(UpgradeError) as refused:
        Engine(pipeline("max"), tmp_path / "state", spark=spark, upgrade=True).run()
    assert "aggregate 'total' was sum of 'amount', is now max of 'amount'" in str(refused.value)
    assert "was removed" not in str(refused.value) and "drop=" not in str(refused.value)
    with pytest.raises(UpgradeError, match=r"processor 'totals' \(map\): it was a aggregate with keyed state, which this map would lose"):
        Engine(pipeline("map"), tmp_path / "state", spark=spark, upgrade=True).run()
    write(tmp_path / "in", 3, INPUT[3])
    with pytest.raises(SavepointError, match="savepoint 'v1' exists already"):
        Engine(pipeline("sum"), tmp_path / "state", spark=spark).run(savepoint="v1")
    store = MetaStore(tmp_path / "state", read_only=True)
    try:
        assert store.committed_epoch() == 2, "refused before epoch 3 ran"
    finally:
        store.close()
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "state" / "savepoints").rglob("*")) == saved
    report = Engine(pipeline("sum", ttl=3), tmp_path / "state", spark=spark, upgrade=True).run()
    assert report.upgraded_from == "v1" and report.epochs == [3]
    description = MetaStore(tmp_path / "state", read_only=True)
    try:
        history = (description.description() or {})["history"]
    finally:
        description.close()
    assert history[-1]["changes"] == ["aggregate 'totals': ttl none -> 3"], history
