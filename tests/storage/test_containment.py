"""Nothing outside a storage root is deleted or written, whatever its metadata or a
symbolic link in it says (issue 30, findings 2 and 3): the reproductions of the
security review, each planted and shown to leave everything outside untouched."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from falkirk.runtime import garbage
from falkirk.storage import (
    CorruptStorageError,
    LocalFileSystem,
    MetaStore,
    RootLock,
    StorageError,
    StoredFile,
)
from falkirk.storage.catchup import copy_root
from falkirk.storage.filesystem import safe_relative, within
from falkirk.storage.metastore import CommitBatch
from falkirk.storage.schema import with_crc


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
    store.commit(CommitBatch(logs=[("a.out", 1, [])]))
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
    store.commit(CommitBatch(logs=[("a.out", 1, [StoredFile(str(source / "logs" / "x" / ".." / ".." / ".." / "secret.txt"), 14, None)])], epoch=1))
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
