"""Catch-up by state movement (:mod:`falkirk.storage.catchup`): a root's committed
state copied into another root - from a local root, and from a remote (Hadoop URI)
root's published metadata - recovers there exactly; a file the source collects
while it is copied makes the copy start again from a newer snapshot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.clickstream import build_pipeline
from falkirk.runtime import Engine
from falkirk.storage import MetaStore, catchup, verify_files
from falkirk.storage.catchup import copy_root
from falkirk.storage.filesystem import HadoopFileSystem, LocalFileSystem
from falkirk.testing.clickstream import batch_output, write_input
from falkirk.testing.verify import differences


def run(spark, clicks: Path, work: Path, storage: str, **kw: object) -> None:  # type: ignore[no-untyped-def]
    Engine(build_pipeline(str(clicks), str(work / "out"), str(work / "rej")), storage, spark=spark, **kw).run()  # type: ignore[arg-type]


@pytest.mark.parametrize("remote", [False, True], ids=["local-root", "uri-root"])
def test_a_copied_root_recovers_exactly(spark, tmp_path: Path, remote: bool) -> None:  # type: ignore[no-untyped-def]
    every = tmp_path / "all"
    write_input(every, files=5, sessions_per_file=20, users=5, seed=3)
    clicks = tmp_path / "in"
    clicks.mkdir()
    names = sorted(p.name for p in every.iterdir())
    for name in names[:3]:
        shutil.copy(every / name, clicks / name)
    source = f"file://{tmp_path / 'a'}" if remote else str(tmp_path / "a")
    run(spark, clicks, tmp_path, source, metadata_dir=tmp_path / "a-meta")
    src_fs = HadoopFileSystem(spark) if remote else LocalFileSystem()
    copied = copy_root(src_fs, source, LocalFileSystem(), str(tmp_path / "b"), tmp_path / "b")
    assert copied == 3
    store = MetaStore(tmp_path / "b", root=str(tmp_path / "b"), read_only=True)
    try:
        files = [f for f in store.all_files() if f.path.startswith(str(tmp_path / "b") + "/")]
        assert files, "state and logs were copied under the new root"
        verify_files(files)
    finally:
        store.close()
    for name in names[3:]:  # two more files
        shutil.copy(every / name, clicks / name)
    run(spark, clicks, tmp_path, str(tmp_path / "b"))  # recovers from the copy, goes on
    out = pd.read_parquet(tmp_path / "out")
    assert differences(out, batch_output(spark, str(clicks)), name="output") == []


def test_a_file_collected_during_the_copy_starts_it_again(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    clicks = tmp_path / "in"
    write_input(clicks, files=2, sessions_per_file=20, users=5, seed=4)
    run(spark, clicks, tmp_path, str(tmp_path / "a"))
    real = catchup._copy_files
    attempts = []

    def collected_once(*args, **kw):  # type: ignore[no-untyped-def]
        attempts.append(1)
        if len(attempts) == 1:
            raise FileNotFoundError("collected by the source meanwhile")
        return real(*args, **kw)

    monkeypatch.setattr(catchup, "_copy_files", collected_once)
    assert copy_root(LocalFileSystem(), str(tmp_path / "a"), LocalFileSystem(), str(tmp_path / "b"), tmp_path / "b") == 2
    assert len(attempts) == 2
