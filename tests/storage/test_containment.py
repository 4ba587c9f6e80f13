"""Nothing outside a storage root is deleted or written, whatever its metadata or a
symbolic link in it says (issue 30, findings 2 and 3): the reproductions of the
security review, each planted and shown to leave everything outside untouched."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from falkirk.control import garbage
from falkirk.storage import (
    CorruptStorageError,
    LocalFileSystem,
    MetaStore,
    RootLock,
    StorageError,
    StoredFile,
)
from falkirk.storage.batch import CommitBatch
from falkirk.storage.catchup import copy_root
from falkirk.storage.filesystem import safe_relative, within
from falkirk.storage.schema import with_crc
from falkirk.time.ticks import Tick


def important(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere"
    (outside / "important_dir").mkdir(parents=True)
    (outside / "important_dir" / "data").write_text("keep me")
    (outside / "file.txt").write_text("keep me too")
    return outside


def untouched(outside: Path) -> bool:
    return (outside / "important_dir" / "data").read_text() == "keep me" and (outside / "file.txt").exists()


def test_the_start_up_sweep_never_follows_a_link_out_of_the_root(tmp_path: Path) -> None:
    outside = important(tmp_path)
    root = tmp_path / "root"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "evil").symlink_to(outside)  # the review's plant
    (root / "checkpoints" / "stats").mkdir(parents=True)
    (root / "checkpoints" / "stats" / "w1").symlink_to(outside / "important_dir")
    store = MetaStore(root)
    try:
        garbage.sweep(LocalFileSystem(), str(root), store)
    finally:
        store.close()
    assert untouched(outside)
    assert LocalFileSystem().children(str(root / "logs")) == [(str(root / "logs" / "evil"), False)]


@pytest.mark.parametrize("planted", ["absolute", "dotdot", "link"])
def test_a_forgotten_file_named_outside_the_root_is_never_deleted(tmp_path: Path, planted: str) -> None:
    outside = important(tmp_path)
    root = tmp_path / "root"
    (root / "logs" / "e").mkdir(parents=True)
    (root / "logs" / "e" / "in").symlink_to(outside)
    path = {
        "absolute": str(outside / "important_dir"),
        "dotdot": str(root / "logs" / ".." / ".." / "elsewhere" / "file.txt"),
        "link": str(root / "logs" / "e" / "in" / "file.txt"),
    }[planted]
    with pytest.raises(CorruptStorageError, match="outside the root"):
        garbage.delete(LocalFileSystem(), str(root), [StoredFile(path, 1, None)])
    assert untouched(outside)


def test_metadata_naming_a_path_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = MetaStore(root)
    store.commit(CommitBatch(logs=[("a.out", Tick(1), [])]))
    store.close()
    db = sqlite3.connect(root / "meta.sqlite")
    db.execute("DELETE FROM message_logs")
    db.execute("INSERT INTO message_logs VALUES (?, ?, ?, ?, ?)", with_crc("a.out", 1, -1, json.dumps([["@root/../../x", 1, None]])))
    db.commit()
    db.close()
    store = MetaStore(root, read_only=True)
    try:
        with pytest.raises(CorruptStorageError, match="a file outside its storage root"):
            store.logs("a.out")
    finally:
        store.close()


def test_a_catch_up_copies_nothing_from_or_to_outside_the_roots(tmp_path: Path) -> None:
    source, dest = tmp_path / "a", tmp_path / "b"
    (source / "logs" / "x").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("not the pair's")
    store = MetaStore(source)
    # A file named relative to the source root that climbs out of it (the review: rel="../../escaped.txt").
    store.commit(CommitBatch(logs=[("a.out", Tick(1), [StoredFile(str(source / "logs" / "x" / ".." / ".." / ".." / "secret.txt"), 14, None)])], epoch=1))
    store.close()
    with pytest.raises(CorruptStorageError, match="outside"):
        copy_root(LocalFileSystem(), str(source), LocalFileSystem(), str(dest), dest)
    assert {p.name for p in tmp_path.iterdir()} <= {"a", "b", "secret.txt"}
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*")), "nothing copied"


def test_the_lock_file_is_never_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    root = tmp_path / "root"
    root.mkdir()
    (root / "falkirk.lock").symlink_to(victim)
    with pytest.raises(StorageError, match="is a symbolic link"):
        RootLock(root).acquire()
    assert victim.read_text() == "precious"
    (root / "falkirk.lock").unlink()
    os.mkfifo(root / "falkirk.lock")
    with pytest.raises(StorageError, match="not a regular file"):
        RootLock(root).acquire()


def test_paths_inside_and_outside() -> None:
    fs = LocalFileSystem()
    assert within(fs, "/r", "/r/logs/x") and not within(fs, "/r", "/r") and not within(fs, "/r", "/rx/y")
    assert not within(fs, "/r", "/r/../etc/passwd")
    assert safe_relative("logs/a/b") and not safe_relative("../x") and not safe_relative("/x") and not safe_relative("a//b")


def test_a_log_state_or_checkpoint_file_named_outside_the_root_is_refused(tmp_path: Path) -> None:
    """Only a sink's files (its table, where the user put it) may lie outside the
    root; a log, state file or checkpoint named by an absolute path outside it is
    refused - not read (its digest could be missing, too), copied or deleted."""
    root = tmp_path / "root"
    secret = tmp_path / "secret.txt"
    secret.write_text("not the root's")
    store = MetaStore(root)
    store.commit(
        CommitBatch(
            logs=[("a.out", Tick(1), [StoredFile(str(secret), 14, None)])],
            sink_commits=[("out", 1, [StoredFile(str(tmp_path / "table" / "epoch-1.parquet"), 10, None)])],
            epoch=1,
        )
    )
    store.close()
    store = MetaStore(root, read_only=True)
    try:
        with pytest.raises(CorruptStorageError, match=r"names '.*secret.txt' in message_logs, a file outside its storage root"):
            store.logs("a.out")
        with pytest.raises(CorruptStorageError):
            store.all_files()
        assert [f.path for f in store.sink_commits("out")[1]] == [str(tmp_path / "table" / "epoch-1.parquet")]
    finally:
        store.close()
    dest = tmp_path / "copy"
    with pytest.raises(CorruptStorageError, match="outside its storage root"):
        copy_root(LocalFileSystem(), str(root), LocalFileSystem(), str(dest), dest)
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*")), "nothing copied"


def test_a_file_uri_root_judges_links_as_a_local_path(tmp_path: Path) -> None:
    """A ``file:`` root goes through Hadoop's file system, which follows links as the
    local one does: a link inside it leads outside."""
    outside = important(tmp_path)
    root = tmp_path / "root"
    (root / "checkpoints").mkdir(parents=True)
    (root / "checkpoints" / "agg").symlink_to(outside)
    hadoop_like = object()  # any file system that is not the local one
    for spelling in (f"file:{root}", f"file://{root}"):
        assert not within(hadoop_like, spelling, f"{spelling}/checkpoints/agg/important_dir/data")  # type: ignore[arg-type]
        assert within(hadoop_like, spelling, f"{spelling}/logs/x")  # type: ignore[arg-type]


def test_status_reads_no_lock_file_through_a_link_a_fifo_or_a_device(tmp_path: Path) -> None:
    """``falkirk status`` hung on a FIFO planted as the lock file (and would read a
    link to /dev/zero until memory ran out): it refuses them, at once."""
    from falkirk.ops.status import driver_holding

    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "falkirk.lock")
    with pytest.raises(StorageError, match="not a regular file"):
        driver_holding(str(root))
    (root / "falkirk.lock").unlink()
    (root / "falkirk.lock").symlink_to("/dev/zero")
    with pytest.raises(StorageError, match="not a lock file Falkirk wrote"):
        driver_holding(str(root))
    (root / "falkirk.lock").unlink()
    assert driver_holding(str(root)) is None


def test_a_link_swapped_in_after_the_check_leads_nothing_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's race: a folder on the way to a forgotten file replaced by a link
    between the check that it lies inside and the deletion. The deletion walks down
    from the root without following links, so it refuses instead of deleting there."""
    outside = important(tmp_path)
    (outside / "important_dir" / "part-0.parquet").write_text("keep me")
    root = tmp_path / "root"
    (root / "checkpoints" / "agg" / "w1").mkdir(parents=True)
    (root / "checkpoints" / "agg" / "w1" / "part-0.parquet").write_text("old")
    real_check = garbage._check_inside

    def check_then_swap(fs, root_, path):  # type: ignore[no-untyped-def]
        real_check(fs, root_, path)
        agg = root / "checkpoints" / "agg"
        (agg / "w1" / "part-0.parquet").unlink()
        (agg / "w1").rmdir()
        agg.rmdir()
        agg.symlink_to(outside)  # checkpoints/agg now leads outside the root
        (outside / "w1").mkdir()
        (outside / "w1" / "part-0.parquet").write_text("keep me")

    monkeypatch.setattr(garbage, "_check_inside", check_then_swap)
    with pytest.raises(CorruptStorageError, match="changed while its garbage was collected"):
        garbage.delete(LocalFileSystem(), str(root), [StoredFile(str(root / "checkpoints" / "agg" / "w1" / "part-0.parquet"), 3, None)])
    assert untouched(outside) and (outside / "w1" / "part-0.parquet").read_text() == "keep me"
