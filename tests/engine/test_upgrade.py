"""Upgrades (issue 34): ``examples/upgrade.py`` runs version 1, ends with a savepoint,
and version 2 starts from it - with more state partitions - while every run is
SIGKILLed at the new crash points (a savepoint's files written, the upgrade's
mapped state written, the rescaled state restored) and at a random moment. The whole
output (both tables, every row) is compared with plain Python; version 1 on the
upgraded root and version 2 on a root without a savepoint are refused."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.cli import main as cli
from falkirk.demo.upgrade import BIG_COLUMNS, TOTALS_COLUMNS_2, build_pipeline
from falkirk.graph import Pipeline
from falkirk.ops.status import status
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.storage.filesystem import LocalFileSystem
from falkirk.testing.upgrade import Expected, expected, read_input, write_input
from falkirk.testing.visibility import CommittedOnly
from falkirk.upgrades import savepoints
from falkirk.upgrades.upgrade import Upgrade, UpgradeError
from tests.engine.examples import EXAMPLES, finish, kill_at_a_random_moment, run_example_here

pytestmark = pytest.mark.slow

#: Version 1 reads these epochs (and ends with a savepoint), version 2 the rest.
V1, V2 = range(1, 5), range(5, 9)


def args(work: Path, version: int, *more: str) -> list[str]:
    return ["--input", str(work / "in"), "--output", str(work / "out"), "--storage", str(work / "state"), "--version", str(version), *more]


def start(work: Path, version: int, *more: str, crash: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    return subprocess.Popen([sys.executable, str(EXAMPLES / "upgrade.py"), *args(work, version, *more)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def written(work: Path) -> Expected:
    """Every row of both tables, read as any reader would (pandas, no options)."""
    totals = pd.read_parquet(work / "out" / "totals")
    assert list(totals.columns) == ["user", "n", "total", "max_amount", "epoch"], "the new column is in the table's schema"
    rows = totals[TOTALS_COLUMNS_2].astype(object).where(totals[TOTALS_COLUMNS_2].notna(), None)
    big = pd.read_parquet(work / "out" / "big")[BIG_COLUMNS]
    return Expected(
        sorted((u, int(e), int(n), int(t), None if m is None else int(m)) for u, e, n, t, m in rows.itertuples(index=False)),
        sorted((u, int(e), int(a)) for u, e, a in big.itertuples(index=False)),
    )


def test_killed_at_every_new_point_and_at_a_random_moment_the_upgrade_is_exact(spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    write_input(tmp_path / "in", V1, seed=3)
    visible = CommittedOnly(tmp_path / "state")
    # Version 1, killed as it commits, then to its savepoint - killed as it writes it.
    assert finish(start(tmp_path, 1, "--partitions", "2", crash="commit.after:2")) == -signal.SIGKILL
    visible.check()
    assert finish(start(tmp_path, 1, "--savepoint", crash="savepoint.written:1")) == -signal.SIGKILL
    assert [s.name for s in savepoints.listed(LocalFileSystem(), str(tmp_path / "state"))] == [], "a savepoint without its manifest is no savepoint"
    assert finish(start(tmp_path, 1, "--savepoint")) == 0
    [taken] = [s.name for s in savepoints.listed(LocalFileSystem(), str(tmp_path / "state"))]
    assert taken.startswith(f"e{len(V1)}-")
    # Version 2 on more input, with more partitions: killed before its upgrade
    # commits, then as its rescaled state is restored, then at a random moment.
    write_input(tmp_path / "in", V2, seed=3)
    assert finish(start(tmp_path, 2, "--partitions", "4", crash="upgrade.mapped:1")) == -signal.SIGKILL
    visible.check()
    assert finish(start(tmp_path, 2, "--partitions", "4", crash="rescale.restored:1")) == -signal.SIGKILL
    kill_at_a_random_moment(start(tmp_path, 2, "--partitions", "4"), random.Random(7).uniform(4.0, 12.0), visible)
    assert run_example_here("upgrade", args(tmp_path, 2, "--partitions", "4")) == 0
    assert written(tmp_path) == expected(read_input(tmp_path / "in"), upgraded_after=len(V1))
    store = MetaStore(str(tmp_path / "state"))
    try:
        [version_2] = (store.description() or {})["history"]
        assert version_2["savepoint"] == taken and version_2["epoch"] == len(V1)
        assert store.fact("state_partitions") == "4"
    finally:
        store.close()
    # Version 1 on the upgraded root: refused, one line, nothing changed.
    capfd.readouterr()
    code = run_example_here("upgrade", args(tmp_path, 1))  # (in this process: the refusal needs no JVM of its own)
    said = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and len(said) == 1 and "'max_amount'" in said[0], said
    assert written(tmp_path) == expected(read_input(tmp_path / "in"), upgraded_after=len(V1))


def test_an_upgrade_without_a_savepoint_at_the_last_epoch_is_refused(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_input(tmp_path / "in", range(1, 3), seed=5)

    def engine(version: int, **kw: object) -> Engine:
        return Engine(build_pipeline(str(tmp_path / "in"), str(tmp_path / "out"), version), tmp_path / "state", spark=spark, **kw)  # type: ignore[arg-type]

    engine(1).run()
    with pytest.raises(UpgradeError, match="has no savepoint to upgrade from: run the pipeline as it was to a clean stop with a savepoint"):
        engine(2, upgrade=True).run()
    engine(1).run(savepoint="before-2")
    write_input(tmp_path / "in", range(3, 4), seed=5)
    engine(1).run()  # one more epoch after the savepoint
    with pytest.raises(UpgradeError, match="savepoint 'before-2' is at epoch 2, and this storage root committed up to epoch 3"):
        engine(2, upgrade=True).run()
    root = str(tmp_path / "state")
    assert cli(["savepoint", root]) == 2 and "no savepoint holds the last committed epoch (3)" in capsys.readouterr().err
    # A savepoint of another root at the same epoch, copied in: refused, not mixed in.
    other = Engine(build_pipeline(str(tmp_path / "in"), str(tmp_path / "other-out"), 1), tmp_path / "other", spark=spark)
    other.run(savepoint="elsewhere")
    shutil.copytree(tmp_path / "other" / "savepoints" / "elsewhere", tmp_path / "state" / "savepoints" / "elsewhere")
    with pytest.raises(UpgradeError, match="'elsewhere' was taken on another storage root"):
        engine(2, upgrade=Upgrade(savepoint="elsewhere")).run()
    assert cli(["savepoints", root, "--drop", "elsewhere"]) == 0
    capsys.readouterr()
    report = engine(1).run(savepoint=True)  # a clean stop with a savepoint: now it upgrades
    assert cli(["savepoint", root]) == 0 and capsys.readouterr().out.strip() == report.savepoint
    assert cli(["savepoints", root]) == 0
    listed = capsys.readouterr().out
    assert "before-2" in listed and str(report.savepoint) in listed and "totals" in listed
    assert cli(["savepoints", root, "--drop", "before-2"]) == 0 and cli(["savepoints", root, "--json"]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out.split("\n", 1)[1])] == [report.savepoint]
    upgraded = engine(2, upgrade=True).run()
    assert upgraded.upgraded_from == report.savepoint and math.isfinite(upgraded.seconds)
    assert written(tmp_path) == expected(read_input(tmp_path / "in"), upgraded_after=3)


def test_a_savepoint_copied_to_another_root_starts_it_there_and_back(spark: SparkSession, tmp_path: Path) -> None:
    """A savepoint is a directory: copied into another root's ``savepoints/`` (here a
    ``file://`` URI root, reached through Hadoop), ``from_savepoint=`` starts that
    root from it; its own savepoint, copied back to a local root, starts version 2
    there. The tables are the same throughout: exactly an uninterrupted sequence."""
    inputs = tmp_path / "in"

    def pipeline(version: int) -> Pipeline:
        return build_pipeline(str(inputs), str(tmp_path / "out"), version)

    write_input(inputs, range(1, 3), seed=9)
    first = Engine(pipeline(1), tmp_path / "a", spark=spark).run(savepoint="at-2")
    assert first.savepoint == "at-2"
    shutil.copytree(tmp_path / "a" / "savepoints" / "at-2", tmp_path / "b" / "savepoints" / "at-2")
    write_input(inputs, range(3, 5), seed=9)
    there = Engine(pipeline(1), f"file://{tmp_path / 'b'}", spark=spark, metadata_dir=tmp_path / "b-meta", from_savepoint="at-2")
    second = there.run(savepoint="at-4")
    assert second.epochs == [3, 4] and second.upgraded_from == "at-2"
    shutil.copytree(tmp_path / "b" / "savepoints" / "at-4", tmp_path / "c" / "savepoints" / "at-4")
    write_input(inputs, range(5, 7), seed=9)
    third = Engine(pipeline(2), tmp_path / "c", spark=spark, from_savepoint="at-4").run()
    assert third.epochs == [5, 6]
    history = status(str(tmp_path / "c"))["history"]
    assert [(v["version"], v["savepoint"], v["epoch"]) for v in history] == [(2, "at-2", 2), (3, "at-4", 4)]
    assert "aggregate 'totals': aggregate 'max_amount' added (null for the keys held)" in history[1]["changes"]
    assert written(tmp_path) == expected(read_input(inputs), upgraded_after=4)
    shutil.copytree(tmp_path / "b" / "savepoints" / "at-4", tmp_path / "d" / "savepoints" / "at-4")
    damaged = tmp_path / "d" / "savepoints" / "at-4" / "manifest.json"
    damaged.write_text(damaged.read_text()[:-40])
    with pytest.raises(savepoints.SavepointError, match=r"manifest .* is not JSON .* it is damaged"):
        Engine(pipeline(2), tmp_path / "d", spark=spark, from_savepoint="at-4").run()
