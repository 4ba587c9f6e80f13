"""``falkirk status`` and ``falkirk inspect`` read a storage root alone: a stopped
pipeline's processors, policies, frontiers, what is kept, the plan a recovery started
now would follow, and whether a driver holds the root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import EagerCheckpoint, LazyCheckpoint, LogOutputs, Pipeline
from falkirk.io import FileSource, MemorySink, ParquetTableSink, keyed_generator
from falkirk.io.exceptions import InputChangedError
from falkirk.ops.status import driver_holding, inspect, render, status
from falkirk.runtime import Engine
from falkirk.storage import RootLock, StorageError


def run_pipeline(spark: SparkSession, root: Path, epochs: int) -> None:
    p = Pipeline("mixed")
    src = p.source("src", keyed_generator(batches=epochs, rows_per_batch=50, keys=7, seed=3))
    logged = src.map("double", lambda df: df.withColumn("value", df["value"] * 2), policy=LogOutputs())
    logged.aggregate("eager", "key", {"n": ("count", None)}, policy=EagerCheckpoint()).sink("out_eager", MemorySink())
    logged.aggregate("lazy", "key", {"s": ("sum", "value")}, policy=LazyCheckpoint(every=3)).sink("out_lazy", MemorySink())
    Engine(p, root, spark=spark).run()


@pytest.fixture(scope="module")
def stopped(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("status") / "state"
    run_pipeline(spark, root, epochs=5)
    return root


def test_status_of_a_stopped_pipeline(stopped: Path) -> None:
    report = status(str(stopped))
    assert report["pipeline"] == "mixed" and report["driver"] is None
    assert report["epoch"] == 5
    procs = report["processors"]
    assert {n: p["policy"] for n, p in procs.items()} == {
        "src": "Stateless", "double": "LogOutputs", "eager": "EagerCheckpoint", "lazy": "LazyCheckpoint",
        "out_eager": "Stateless", "out_lazy": "Stateless",
    }
    assert procs["eager"]["frontier"] == 5 and procs["eager"]["last_checkpoint"] == 5
    assert procs["lazy"]["last_checkpoint"] in (3, 5)  # every 3rd epoch, and a clean stop's
    assert procs["eager"]["checkpoints"]["count"] >= 1 and procs["eager"]["checkpoints"]["bytes"] > 0
    assert procs["src"]["source"] and procs["src"]["position"] is not None
    assert procs["out_eager"]["sink"] and procs["out_eager"]["inputs"] == ["eager.out"]
    frontiers = report["recovery"]["frontiers"]
    assert set(frontiers) == set(procs)
    assert frontiers["eager"] == [procs["eager"]["frontier"]]
    assert frontiers["lazy"] == [procs["lazy"]["last_checkpoint"]]
    assert all(report["recovery"]["why"].values())
    text = render(report)
    assert "LazyCheckpoint" in text and "recovery would choose" in text and "lazy" in text


def test_status_names_the_driver_holding_the_root(stopped: Path) -> None:
    with RootLock(stopped):
        assert f"pid {os.getpid()}" in (driver_holding(str(stopped)) or "")
        assert f"pid {os.getpid()}" in str(status(str(stopped))["driver"])
    assert driver_holding(str(stopped)) is None


def test_probing_the_driver_never_makes_a_starting_driver_fail(stopped: Path) -> None:
    """Adversarial review: the probe took a shared lock for an instant, and a driver
    starting in that instant was refused ("in use"). It now only reads the kernel's
    lock table."""
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            driver_holding(str(stopped))

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        for _ in range(300):
            with RootLock(stopped):
                pass
    finally:
        stop.set()
        prober.join()


def test_global_checkpoints_report_the_last_commit_not_the_last_barrier(spark: SparkSession, tmp_path: Path) -> None:
    from falkirk.graph import GlobalCheckpoints

    p = Pipeline("g", checkpoints=GlobalCheckpoints(every=3))
    src = p.source("src", keyed_generator(batches=5, rows_per_batch=20, keys=3, seed=1))
    src.aggregate("agg", "key", {"n": ("count", None)}).sink("out", MemorySink())

    def crash_after_5(epoch: int, _s: float, _r: object) -> None:
        if epoch == 5:  # a driver dying here: no final barrier
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError, match="crash"):
        Engine(p, tmp_path / "state", spark=spark, on_epoch=crash_after_5).run()
    report = status(str(tmp_path / "state"))
    assert report["epoch"] == 5
    assert report["processors"]["agg"]["frontier"] == 3  # the last barrier
    assert report["recovery"]["frontiers"]["agg"] == [3]


def test_inspect_an_epoch_and_a_processor(stopped: Path) -> None:
    epoch = inspect(str(stopped), "5")
    assert {r["processor"] for r in epoch["records"]} >= {"eager", "double", "src"}
    assert any(f["kind"] == "state" and f["of"] == "eager" and f["bytes"] > 0 for f in epoch["files"])
    proc = inspect(str(stopped), "eager")
    assert proc["policy"] == "EagerCheckpoint" and proc["records"]
    assert all(Path(f["path"]).exists() for f in proc["files"])
    with pytest.raises(StorageError, match="no processor 'nope'"):
        inspect(str(stopped), "nope")
    with pytest.raises(StorageError, match="epoch 99 has no records"):
        inspect(str(stopped), "99")
    with pytest.raises(StorageError, match="numbered from 1"):
        inspect(str(stopped), "-1")
    with pytest.raises(StorageError, match="no processor '²'"):
        inspect(str(stopped), "²")


def test_the_command_line(stopped: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-m", "falkirk.cli", "status", str(stopped), "--json"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["epoch"] == 5
    out = subprocess.run([sys.executable, "-m", "falkirk.cli", "inspect", str(stopped), "lazy"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["processor"] == "lazy"
    out = subprocess.run([sys.executable, "-m", "falkirk.cli", "status", str(tmp_path / "none")], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "no pipeline has run" in out.stderr


def files_pipeline(work: Path) -> Pipeline:
    p = Pipeline("files")
    (
        p.source("rows", FileSource(str(work / "in"), "csv", "k string, v long", options={"header": "true"}))
        .aggregate("sums", "k", {"s": ("sum", "v")}, policy=LazyCheckpoint(every=3))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def write_files(work: Path, first: int, last: int) -> None:
    (work / "in").mkdir(exist_ok=True)
    for i in range(first, last + 1):
        (work / "in" / f"f-{i:03d}.csv").write_text(f"k,v\na,{i}\nb,{10 * i}\n")


def test_status_says_which_input_files_a_recovery_may_still_read(spark: SparkSession, tmp_path: Path) -> None:
    """The files status calls safe can go; the ones it says to keep, a recovery reads."""
    write_files(tmp_path, 1, 5)
    Engine(files_pipeline(tmp_path), tmp_path / "state", spark=spark).run()
    report = status(str(tmp_path / "state"))
    need = report["processors"]["rows"]["input"]
    last_checkpoint = report["processors"]["sums"]["last_checkpoint"]
    assert need["last"] == "f-005.csv"
    assert last_checkpoint == 3
    assert need["reread"] == {"4": ["f-004.csv"], "5": ["f-005.csv"]}, "the epochs after the lazy checkpoint"
    assert need["safe_before"] == "f-004.csv"
    text = render(report)
    assert "input of rows: files sorting before 'f-004.csv' may be deleted or archived; a recovery may still read epochs 4-5: 'f-004.csv', 'f-005.csv' (keep them)" in text
    for f in sorted((tmp_path / "in").iterdir()):
        if f.name < need["safe_before"]:
            f.unlink()  # what status calls safe
    write_files(tmp_path, 6, 7)
    Engine(files_pipeline(tmp_path), tmp_path / "state", spark=spark).run()  # recovers, reads what was kept
    sums = pd.read_parquet(tmp_path / "out").groupby("k")["s"].last().to_dict()
    assert sums == {"a": sum(range(1, 8)), "b": 10 * sum(range(1, 8))}
    kept = status(str(tmp_path / "state"))["processors"]["rows"]["input"]["reread"]
    assert kept == {"7": ["f-007.csv"]}  # checkpointed at 6
    (tmp_path / "in" / "f-007.csv").unlink()  # one status says to keep: the recovery that needs it stops
    with pytest.raises(InputChangedError, match="was deleted after an epoch was planned"):
        Engine(files_pipeline(tmp_path), tmp_path / "state", spark=spark).run()
