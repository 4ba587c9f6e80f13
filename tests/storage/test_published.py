"""Published metadata of a remote storage root: numbered copies, fencing, damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from falkirk.storage import CorruptStorageError, LocalFileSystem, StorageInUseError
from falkirk.storage.filesystem import FileSystem, HadoopFileSystem
from falkirk.storage.published import PublishedMetadata


def db_with(directory: Path, value: int) -> sqlite3.Connection:
    directory.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(directory / "meta.sqlite", isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    db.execute("INSERT INTO t VALUES (?)", (value,))
    return db


def values(directory: Path) -> list[int]:
    with sqlite3.connect(directory / "meta.sqlite") as db:
        return [v for (v,) in db.execute("SELECT v FROM t ORDER BY v")]


@pytest.fixture(params=["local", "hadoop"])
def fs_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileSystem, str]:
    if request.param == "local":
        return LocalFileSystem(), str(tmp_path / "root")
    spark = request.getfixturevalue("spark")
    return HadoopFileSystem(spark), f"file://{tmp_path}/root"


def test_a_fresh_machine_gets_the_newest_copy_and_old_ones_are_collected(fs_root: tuple[FileSystem, str], tmp_path: Path) -> None:
    fs, root = fs_root
    fs.mkdirs(root)
    writer = PublishedMetadata(fs, root, tmp_path / "a", "meta.sqlite")
    writer.fetch()
    db = db_with(tmp_path / "a", 1)
    for v in (2, 3, 4):
        db.execute("INSERT INTO t VALUES (?)", (v,))
        writer.publish(db)
    assert writer.seq == 3
    names = sorted(Path(p).name for p, _ in fs.children(fs.join(root, "_meta")) if not Path(p).name.startswith("."))
    assert names == ["meta-000000000002.sqlite", "meta-000000000003.sqlite"]
    reader = PublishedMetadata(fs, root, tmp_path / "b", "meta.sqlite")
    reader.fetch()
    assert reader.seq == 3 and values(tmp_path / "b") == [1, 2, 3, 4]


def test_an_unpublished_local_commit_is_not_trusted(tmp_path: Path) -> None:
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    pub = PublishedMetadata(fs, root, tmp_path / "w", "meta.sqlite")
    pub.fetch()
    db = db_with(tmp_path / "w", 1)
    pub.publish(db)
    db.execute("INSERT INTO t VALUES (2)")  # committed locally, then the driver dies
    db.close()
    pub.fetch()
    assert values(tmp_path / "w") == [1]


def test_a_second_driver_is_fenced_at_its_next_publish(tmp_path: Path) -> None:
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    first = PublishedMetadata(fs, root, tmp_path / "one", "meta.sqlite")
    first.fetch()
    db1 = db_with(tmp_path / "one", 1)
    first.publish(db1)
    second = PublishedMetadata(fs, root, tmp_path / "two", "meta.sqlite")
    second.fetch()
    db2 = sqlite3.connect(tmp_path / "two" / "meta.sqlite", isolation_level=None)
    second.publish(db2)
    with pytest.raises(StorageInUseError, match="another driver"):
        first.publish(db1)


def test_a_damaged_copy_is_detected_and_interrupted_uploads_are_removed(tmp_path: Path) -> None:
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    pub = PublishedMetadata(fs, root, tmp_path / "w", "meta.sqlite")
    pub.fetch()
    pub.publish(db_with(tmp_path / "w", 1))
    meta = tmp_path / "root" / "_meta"
    (meta / "_tmp-deadbeef").write_bytes(b"half an upload")
    copy = meta / "meta-000000000001.sqlite"
    data = bytearray(copy.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)
    copy.write_bytes(bytes(data))
    with pytest.raises(CorruptStorageError, match="damaged"):
        PublishedMetadata(fs, root, tmp_path / "x", "meta.sqlite").fetch()
    assert not (meta / "_tmp-deadbeef").exists()
