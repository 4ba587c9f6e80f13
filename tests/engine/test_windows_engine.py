"""Window processors in the engine, in process: continuous eventual checkpoints with
a user function over the windows' rows (the rows are in the footprints), a
processor failure mid-run recovered in place (the eventual checkpoint rebuilt from
the log, the input after T replayed from the processor's own input log), the log
and input before T collected as T advances, and the same query under lazy
checkpoints. Whole outputs compared with the plain-Python reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.windowed import CSV_OPTIONS, RAW_SCHEMA, words
from falkirk.graph import ContinuousEventualCheckpoint, LazyCheckpoint, Pipeline, Policy, Session
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.testing.windowed import Windows, parse, read_input, write_input

SHAPE = Session(4)
DELAY = 10


def summary(key: Any, start: int, end: int, rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [len(rows)], "latest": [int(rows["ts"].max())]})


def pipeline(files: Path, out: Path, policy: Policy) -> Pipeline:
    p = Pipeline("windows_engine")
    counts = p.source("lines", FileSource(str(files), "csv", RAW_SCHEMA, 1, CSV_OPTIONS)).map("words", words).window(
        "counts", "word", "ts", SHAPE, watermark_delay=DELAY, fn=summary, output_schema="n long, latest long", policy=policy
    )
    counts.sink("output", ParquetTableSink(str(out), epoch_column=None))
    return p


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("windows-engine") / "in"
    write_input(root, epochs=8, rows=30, seed=41, spread=25, step=8)
    return root


def expected(files: Path) -> list[tuple[int, int, str, int]]:
    ref = Windows(SHAPE, DELAY)
    out: list[tuple[int, int, str, int]] = []
    for raw in read_input(files):
        out += ref.epoch([r for r in (parse(t, w) for t, w in raw) if r is not None])
    out += ref.epoch([], final=True)
    return sorted(out)


@pytest.mark.parametrize(
    "policy",
    [ContinuousEventualCheckpoint(replay_target=50, extent_target=30), LazyCheckpoint(every=3)],
    ids=["cec-targets", "lazy"],
)
def test_a_failed_window_processor_recovers_in_place(spark: SparkSession, files: Path, tmp_path: Path, policy: Policy) -> None:
    engine = Engine(pipeline(files, tmp_path / "out", policy), tmp_path / "state", spark=spark)
    failed: list[int] = []

    def fail_once(epoch: int, *_: object) -> None:
        if epoch == 6 and not failed:
            failed.append(epoch)
            engine.fail("counts")

    engine.on_epoch = fail_once
    report = engine.run(finish=True)
    assert failed and report.partial, "the failure was not injected"
    out = pd.read_parquet(tmp_path / "out")
    got = sorted((int(a), int(b), str(w), int(n)) for a, b, w, n in out[["window_start", "window_end", "word", "n"]].itertuples(index=False, name=None))
    want = expected(files)
    assert len(want) > 20
    assert got == want
    assert (out["latest"] < out["window_end"]).all() and (out["latest"] >= out["window_start"]).all()
    assert not (tmp_path / "state" / "logs" / "counts.late").exists()  # unconnected: never logged
    info = engine.state.operators["counts"].describe()  # type: ignore[attr-defined]
    if isinstance(policy, ContinuousEventualCheckpoint):
        assert info["extent_start"] >= 1 and "ec_load_seconds" in info
        if policy.replay_target is not None:
            assert info["g_check_rows"] > 0  # the targets moved T
            kept = sorted(p.name for p in (tmp_path / "state" / "logs" / "counts.in0").iterdir())
            assert len(kept) <= 2, f"input before T was never collected: {kept}"  # 9 epochs were logged
