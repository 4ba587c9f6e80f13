"""A root whose metadata is missing or empty is refused when it holds what only a
commit could have left (issue 29, finding 2), and started as new otherwise."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from falkirk.cli import main as cli
from falkirk.storage import CorruptStorageError, LocalFileSystem, MetaStore
from falkirk.storage.batch import CommitBatch
from falkirk.storage.evidence import COMMITTED_MARK, check_metadata, committed_evidence


def check(root: Path) -> None:
    check_metadata(LocalFileSystem(), str(root), root, local=True)


def test_a_new_root_has_no_evidence(tmp_path: Path) -> None:
    (tmp_path / "falkirk.lock").write_text("{}")
    (tmp_path / "checkpoints" / "stats").mkdir(parents=True)
    (tmp_path / "logs").mkdir()
    check(tmp_path)  # a lock file and empty folders: a new root
    (tmp_path / "meta.sqlite").write_bytes(b"")
    check(tmp_path)


def test_a_wal_counts_only_once_it_holds_a_committed_epoch(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    keep = sqlite3.connect(tmp_path / "meta.sqlite")  # holds the log open: not checkpointed on close
    keep.execute("PRAGMA wal_autocheckpoint=0")
    keep.execute("SELECT 1").fetchall()
    store.describe("p", {"identity": "p.x"})
    wal = (tmp_path / "meta.sqlite-wal").read_bytes()
    store.commit(CommitBatch(epoch=1))
    committed = (tmp_path / "meta.sqlite-wal").read_bytes()
    store.close()
    keep.close()
    (tmp_path / "meta.sqlite").unlink(missing_ok=True)
    assert (tmp_path / COMMITTED_MARK).exists(), "left at the first committed epoch"
    (tmp_path / COMMITTED_MARK).unlink()  # the log alone, here
    (tmp_path / "meta.sqlite-wal").write_bytes(wal)
    assert committed_evidence(LocalFileSystem(), str(tmp_path), tmp_path) == [], "a run that never committed an epoch"
    (tmp_path / "meta.sqlite-wal").write_bytes(committed)
    with pytest.raises(CorruptStorageError, match=r"meta\.sqlite-wal holds committed epochs"):
        check(tmp_path)


@pytest.mark.parametrize("damage", ["removed", "emptied"])
def test_a_root_that_lost_its_metadata_is_refused_and_left_as_it_is(spark, tmp_path: Path, damage: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from falkirk.demo.clickstream import build_pipeline
    from falkirk.graph import LazyCheckpoint
    from falkirk.runtime import Engine
    from falkirk.testing.clickstream import write_input

    write_input(tmp_path / "in", files=4, sessions_per_file=10, users=5, seed=1)
    pipeline = build_pipeline(str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "rej"),
                              stats_policy=LazyCheckpoint(every=2))
    root = tmp_path / "state"
    Engine(pipeline, root, spark=spark).run(max_epochs=3)
    output = pd.read_parquet(tmp_path / "out")
    if damage == "removed":
        (root / "meta.sqlite").unlink()
    else:
        (root / "meta.sqlite").write_bytes(b"")
    before = sorted((str(p), p.stat().st_size) for p in root.rglob("*") if p.is_file() and p.name != "falkirk.lock")
    with pytest.raises(CorruptStorageError, match=f"metadata of storage root .* is {'missing' if damage == 'removed' else 'empty'}") as caught:
        Engine(pipeline, root, spark=spark).run()
    assert "checkpoints/ holds files" in str(caught.value) and "Restore the metadata from a backup" in str(caught.value)
    after = sorted((str(p), p.stat().st_size) for p in root.rglob("*") if p.is_file() and p.name != "falkirk.lock")
    assert after == before, "nothing swept, nothing written"
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out"), output)
    assert cli(["status", str(root)]) == 2
    assert "Restore the metadata from a backup" in capsys.readouterr().err


def test_a_root_without_checkpoints_or_logs_is_known_by_its_mark(tmp_path: Path) -> None:
    """Review: a stateless pipeline's root holds only meta.sqlite and the lock; lost,
    it was started afresh and wrote every epoch again."""
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(epoch=1))
    store.close()
    (tmp_path / "meta.sqlite").unlink()
    with pytest.raises(CorruptStorageError, match=r"falkirk\.committed says it committed epochs"):
        check(tmp_path)


def test_a_database_left_without_its_log_counts_as_empty(tmp_path: Path) -> None:
    """Review: killed before SQLite copied its log in, meta.sqlite is a header only;
    with the log removed it held no table and was taken for a new root."""
    keep = sqlite3.connect(tmp_path / "meta.sqlite")
    keep.execute("PRAGMA journal_mode=WAL")  # the header, as a new store writes it
    keep.close()
    (tmp_path / "checkpoints" / "stats" / "w1").mkdir(parents=True)
    (tmp_path / "checkpoints" / "stats" / "w1" / "part-0.parquet").write_bytes(b"x")
    assert (tmp_path / "meta.sqlite").stat().st_size > 0
    with pytest.raises(CorruptStorageError, match="no table: its write-ahead log is gone"):
        check(tmp_path)
