"""Deleting forgotten files never removes a directory Falkirk did not create."""

from __future__ import annotations

from pathlib import Path

import pytest

from falkirk.control.garbage import delete
from falkirk.storage import CorruptStorageError, LocalFileSystem, StoredFile


def _file(path: Path) -> StoredFile:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return StoredFile(str(path), 1)


def test_a_table_folder_outlives_its_deleted_files(tmp_path: Path) -> None:
    # Finding 1 of the data-loss review: a sink's table holds epoch-N.parquet files
    # and no part-* file, so "remove the folder once it holds no part file" removed
    # the whole table with every committed epoch.
    root = tmp_path / "state"
    table = tmp_path / "out"
    kept = _file(table / "epoch-0000000001.parquet")
    gone = _file(table / "epoch-0000000002.parquet")
    # Sink commits' files are never forgotten into deletion (they stay the table's);
    # one named anyway lies outside the root and is refused, the table untouched.
    with pytest.raises(CorruptStorageError, match="outside the root"):
        delete(LocalFileSystem(), str(root), [gone])
    assert Path(kept.path).exists() and Path(gone.path).exists() and table.is_dir()


def test_a_write_directory_goes_with_its_last_part_file(tmp_path: Path) -> None:
    root = tmp_path / "state"
    first = _file(root / "logs" / "a.out" / "e1-abc" / "part-0.parquet")
    second = _file(root / "logs" / "a.out" / "e1-abc" / "part-1.parquet")
    other = _file(root / "checkpoints" / "agg" / "e2-def" / "part-0.parquet")
    fs = LocalFileSystem()
    delete(fs, str(root), [first])
    assert (root / "logs" / "a.out" / "e1-abc").is_dir()  # still holds part-1
    delete(fs, str(root), [second])
    assert not (root / "logs" / "a.out" / "e1-abc").exists()
    assert (root / "logs" / "a.out").is_dir()  # the owner's directory stays
    assert Path(other.path).exists()


def test_a_file_directly_under_the_root_leaves_the_root(tmp_path: Path) -> None:
    root = tmp_path / "state"
    stray = _file(root / "x.parquet")
    delete(LocalFileSystem(), str(root), [stray])
    assert root.is_dir()
