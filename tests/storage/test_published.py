"""Published metadata of a remote storage root: numbered copies, the lease, fencing
(no acknowledged commit is ever lost to a second driver), damage."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
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
    fs = HadoopFileSystem(spark)
    return fs, fs.spelling(f"file://{tmp_path}/root")


def driver(fs: FileSystem, root: str, local: Path, **kw: float) -> PublishedMetadata:
    pub = PublishedMetadata(fs, root, local, "meta.sqlite", **kw)
    pub.acquire()
    pub.fetch()
    return pub


def names(fs: FileSystem, root: str, prefix: str) -> list[str]:
    return sorted(n for n in (p.rsplit("/", 1)[-1] for p, _ in fs.children(fs.join(root, "_meta"))) if n.startswith(prefix))


def test_a_fresh_machine_gets_the_newest_copy_and_old_ones_are_collected(fs_root: tuple[FileSystem, str], tmp_path: Path) -> None:
    fs, root = fs_root
    writer = driver(fs, root, tmp_path / "a")
    db = db_with(tmp_path / "a", 1)
    for v in (2, 3, 4):
        db.execute("INSERT INTO t VALUES (?)", (v,))
        writer.publish(db)
    assert writer.seq == 3
    assert names(fs, root, "meta-") == ["meta-000000000002.sqlite", "meta-000000000003.sqlite"]
    writer.release()
    reader = driver(fs, root, tmp_path / "b")
    assert reader.seq == 3 and values(tmp_path / "b") == [1, 2, 3, 4]
    reader.release()


def test_an_unpublished_local_commit_is_not_trusted(tmp_path: Path) -> None:
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    pub = driver(fs, root, tmp_path / "w")
    db = db_with(tmp_path / "w", 1)
    pub.publish(db)
    db.execute("INSERT INTO t VALUES (2)")  # committed locally, then the driver dies
    db.close()
    pub.fetch()
    assert values(tmp_path / "w") == [1]
    pub.release()


def test_a_live_holder_refuses_a_second_driver_and_a_released_root_is_taken(fs_root: tuple[FileSystem, str], tmp_path: Path) -> None:
    fs, root = fs_root
    first = driver(fs, root, tmp_path / "one")
    first.publish(db_with(tmp_path / "one", 1))
    with pytest.raises(StorageInUseError, match=rf"in use by driver #1: pid {os.getpid()}"):
        PublishedMetadata(fs, root, tmp_path / "two", "meta.sqlite").acquire()
    first.release()
    second = driver(fs, root, tmp_path / "two")
    assert second.generation == 2 and values(tmp_path / "two") == [1]
    second.release()


def test_a_driver_whose_lease_was_taken_cannot_commit(tmp_path: Path) -> None:
    # The first driver stalls (its lease is taken over, as after a missed heartbeat);
    # the second claims the root. The first's next commit is refused, not published:
    # the second driver's commits are never overwritten.
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    first = driver(fs, root, tmp_path / "one")
    db1 = db_with(tmp_path / "one", 1)
    first.publish(db1)
    (tmp_path / "root" / "_meta" / "driver-000000000001.released").write_text("taken over")
    second = driver(fs, root, tmp_path / "two")
    db2 = sqlite3.connect(tmp_path / "two" / "meta.sqlite", isolation_level=None)
    second.claim(db2)
    db1.execute("INSERT INTO t VALUES (2)")
    with pytest.raises(StorageInUseError, match="took this storage root"):
        first.publish(db1)
    db2.execute("INSERT INTO t VALUES (3)")
    second.publish(db2)
    third = driver(fs, root, tmp_path / "three") if second.release() is None else None
    assert third is not None and values(tmp_path / "three") == [1, 3]
    third.release()


@pytest.mark.parametrize(
    ("claim", "refusal"),
    [(False, "published metadata #1 first"), (True, "upload of metadata #1 was removed")],
    ids=["rename-refused", "upload-removed"],
)
def test_a_lease_taken_while_a_commit_uploads_lets_only_one_commit(
    fs_root: tuple[FileSystem, str], tmp_path: Path, claim: bool, refusal: str
) -> None:
    # The first driver passes its lease check, then stalls while uploading; meanwhile
    # its lease is taken over and the new holder publishes #1 (plainly, or by claiming
    # the root, which also removes older drivers' uploads). The first driver's #1 is
    # refused: one commit, not two.
    fs, root = fs_root
    new: list[PublishedMetadata] = []

    def taken_over_meanwhile() -> None:
        (Path(root.removeprefix("file:")) / "_meta" / "driver-000000000001.released").write_text("expired")
        new.append(driver(fs, root, tmp_path / "b"))
        db_b = db_with(tmp_path / "b", 20)
        new[0].claim(db_b) if claim else new[0].publish(db_b)

    first = driver(fs, root, tmp_path / "a")
    db_a = db_with(tmp_path / "a", 1)
    first.before_publish = taken_over_meanwhile
    with pytest.raises(StorageInUseError, match=refusal):
        first.publish(db_a)
    assert names(fs, root, "_tmp-") == []  # the loser removed its upload
    new[0].release()
    reader = driver(fs, root, tmp_path / "r")
    assert values(tmp_path / "r") == [20]
    reader.release()


def test_a_stalled_driver_cannot_reuse_a_collected_name(tmp_path: Path) -> None:
    # A driver at #1 stalls between its checks and its rename while another publishes
    # #2..#4 and collects #1-#2: renaming to the free name #2 succeeds, but the copy is
    # not the newest, so it is withdrawn and the commit refused.
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    stale = driver(fs, root, tmp_path / "s")
    db_s = db_with(tmp_path / "s", 1)
    stale.publish(db_s)

    def others_commit_meanwhile() -> None:
        live = PublishedMetadata(fs, root, tmp_path / "l", "meta.sqlite")
        live.fetch()
        live.generation = stale.generation  # the same lease, as if it had expired unseen
        db_l = sqlite3.connect(tmp_path / "l" / "meta.sqlite", isolation_level=None)
        for v in (2, 3, 4):
            db_l.execute("INSERT INTO t VALUES (?)", (v,))
            live.publish(db_l)

    stale.before_publish = others_commit_meanwhile
    db_s.execute("INSERT INTO t VALUES (99)")
    with pytest.raises(StorageInUseError, match="#4 was published"):
        stale.publish(db_s)
    assert names(fs, root, "meta-") == ["meta-000000000003.sqlite", "meta-000000000004.sqlite"]
    stale.before_publish = lambda: None
    stale.release()
    reader = driver(fs, root, tmp_path / "r")
    assert values(tmp_path / "r") == [1, 2, 3, 4]
    reader.release()


def test_a_damaged_copy_is_detected_also_when_its_size_is_unchanged(fs_root: tuple[FileSystem, str], tmp_path: Path) -> None:
    fs, root = fs_root
    pub = driver(fs, root, tmp_path / "w")
    pub.publish(db_with(tmp_path / "w", 987654321))
    pub.release()
    copy = tmp_path / "root" / "_meta" / "meta-000000000001.sqlite"
    data = bytearray(copy.read_bytes())
    at = data.index((987654321).to_bytes(4, "big"))  # the stored integer
    data[at + 3] ^= 0x01  # 987654321 -> 987654320: same size, still a valid database
    copy.write_bytes(bytes(data))
    with pytest.raises(CorruptStorageError, match="SHA-256 does not match"):
        driver(fs, root, tmp_path / "x")


def test_uploads_of_older_drivers_are_removed_only_after_the_claim(tmp_path: Path) -> None:
    fs, root = LocalFileSystem(), str(tmp_path / "root")
    first = driver(fs, root, tmp_path / "one")
    first.publish(db_with(tmp_path / "one", 1))
    first.release()
    leftover = tmp_path / "root" / "_meta" / "_tmp-000000000001-deadbeef"
    leftover.write_bytes(b"half an upload")
    second = driver(fs, root, tmp_path / "two")
    assert leftover.exists()  # acquired and fetched, not yet claimed
    second.claim(sqlite3.connect(tmp_path / "two" / "meta.sqlite", isolation_level=None))
    assert not leftover.exists()
    second.release()


_HOLDER = """
import sys, time
from falkirk.storage import LocalFileSystem
from falkirk.storage.published import PublishedMetadata
pub = PublishedMetadata(LocalFileSystem(), sys.argv[1], sys.argv[2], "meta.sqlite", lease_interval=0.2, lease_timeout=1.5)
pub.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_holder_on_another_host_keeps_the_root_while_its_heartbeat_moves(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    env = {**os.environ, "FALKIRK_HOST": "another-host"}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, root, str(tmp_path / "h")], env=env, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        started = time.monotonic()
        with pytest.raises(StorageInUseError, match="another-host"):
            PublishedMetadata(LocalFileSystem(), root, tmp_path / "x", "meta.sqlite", lease_interval=0.2, lease_timeout=1.5).acquire()
        assert time.monotonic() - started < 1.5  # a moving heartbeat is seen at once
        holder.send_signal(19)  # SIGSTOP: alive, but its heartbeat stops (a long pause)
        taker = PublishedMetadata(LocalFileSystem(), root, tmp_path / "y", "meta.sqlite", lease_interval=0.2, lease_timeout=1.5)
        taker.acquire()  # waits out the timeout, then takes generation 2
        assert taker.generation == 2
        taker.release()
    finally:
        holder.kill()
        holder.wait()
