"""The metadata store: atomic commits (also under SIGKILL), verification, schema."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from falkirk.recovery import CheckpointMeta, Topology
from falkirk.storage import (
    CommitBatch,
    CorruptStorageError,
    Forget,
    MetaStore,
    StorageError,
    make_durable,
    verify_files,
)
from falkirk.storage.schema import SCHEMA_VERSION
from falkirk.time.ticks import Tick
from tests.domains import E, down


@pytest.fixture
def topo() -> Topology:
    return Topology.build({"src": E, "agg": E}, [("e", "src", "agg", "identity")])


def data_file(tmp_path: Path, name: str, payload: bytes = b"parquet bytes") -> Path:
    path = tmp_path / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def test_commit_and_read_back(tmp_path: Path, topo: Topology) -> None:
    store = MetaStore(tmp_path)
    files = make_durable([data_file(tmp_path, "a.parquet")])
    store.commit(
        CommitBatch(
            checkpoints=[(CheckpointMeta.build(topo, "agg", down(E, 2)), files)],
            offsets=[("src", 2, {"files": ["in-001.csv"]})],
            sink_commits=[("agg", 2, files)],
        )
    )
    store.commit(CommitBatch(checkpoints=[(CheckpointMeta.build(topo, "agg", down(E, 1)), [])]))
    stored = MetaStore(tmp_path).checkpoints(topo)
    assert [s.meta.frontier for s in stored["agg"]] == [down(E, 1), down(E, 2)]
    assert stored["agg"][1].files == tuple(files)
    assert store.offsets("src") == {2: {"files": ["in-001.csv"]}}
    assert list(store.sink_commits("agg")) == [2]
    assert store.referenced_files() == {str(tmp_path / "data" / "a.parquet")}


def test_duplicate_commit_is_refused_whole(tmp_path: Path, topo: Topology) -> None:
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(logs=[("src.out", Tick(1), [])]))
    with pytest.raises(StorageError, match="already committed"):
        store.commit(
            CommitBatch(
                checkpoints=[(CheckpointMeta.build(topo, "agg", down(E, 1)), [])],
                logs=[("src.out", Tick(1), [])],
            )
        )
    assert store.checkpoints(topo)["agg"] == []  # nothing of the refused batch is visible


def test_replayed_offsets_keep_the_first_assignment(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(offsets=[("src", 1, ["a.csv"])]))
    store.commit(CommitBatch(offsets=[("src", 1, ["b.csv"])]))
    assert store.offsets("src") == {1: ["a.csv"]}


def test_a_root_with_planned_offsets_only_has_commits_but_no_state_or_output(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    assert not store.has_commits()
    store.commit(CommitBatch(offsets=[("src", 1, ["a.csv"])]))
    assert store.has_commits()  # not a new root: its epochs read those files again
    assert not store.has_commits(planned=False)  # a changed pipeline may run them
    store.commit(CommitBatch(epoch=1))
    assert store.has_commits(planned=False)


def test_forget_returns_the_files_to_delete(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    files = make_durable([data_file(tmp_path, "log.parquet"), data_file(tmp_path, "s.parquet")])
    store.commit(CommitBatch(logs=[("a.out", Tick(3), files[:1])], state=[("agg", Tick(3), "base", files[1:])]))
    assert store.state_files("agg") == [(Tick(3), "base", tuple(files[1:]))]
    gone = store.forget(Forget(logs=[("a.out", Tick(3))], state=[("agg", Tick(3))]))
    assert gone == files and store.logs("a.out") == {} and store.state_files("agg") == []


def test_forgetting_rides_on_a_commit_and_keeps_sink_files(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    log, out = make_durable([data_file(tmp_path, "log.parquet"), data_file(tmp_path, "epoch-1.parquet")])
    store.commit(CommitBatch(logs=[("a.out", Tick(1), [log])], sink_commits=[("sink", 1, [out])]))
    gone = store.commit(CommitBatch(logs=[("a.out", Tick(2), [])], forget=Forget(logs=[("a.out", Tick(1))], sinks=[("sink", 1)])))
    assert gone == [log]  # the sink's file belongs to its table: never returned for deletion
    assert store.logs("a.out") == {Tick(2): ()} and store.sink_commits("sink") == {}


def test_offsets_are_pruned_but_each_source_keeps_its_position(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    for epoch in range(1, 6):  # "b" reads nothing new after epoch 2
        store.commit(CommitBatch(offsets=[("a", epoch, {"n": epoch}), ("b", epoch, {"n": epoch} if epoch <= 2 else None)]))
    store.commit(CommitBatch(forget=Forget(offsets_upto={"a": 4, "b": 4})))
    assert store.offsets("a") == {5: {"n": 5}}
    assert store.offsets("b") == {2: {"n": 2}, 5: None}  # its position (epoch 2) stays
    assert store.position("a") == {"n": 5} and store.position("b") == {"n": 2}


def test_damaged_files_are_detected(tmp_path: Path) -> None:
    path = data_file(tmp_path, "s.parquet", b"0123456789" * 100)
    (stored,) = make_durable([path])
    verify_files([stored])
    data = bytearray(path.read_bytes())
    data[500] ^= 0x04  # a flipped bit: same size
    path.write_bytes(bytes(data))
    verify_files([stored], deep=False)  # sizes alone do not see it
    with pytest.raises(CorruptStorageError, match=r"SHA-256 is .* a changed byte"):
        verify_files([stored])
    path.write_bytes(b"trunc")
    with pytest.raises(CorruptStorageError, match="truncated"):
        verify_files([stored])
    path.unlink()
    with pytest.raises(CorruptStorageError, match="missing"):
        verify_files([stored])
    with pytest.raises(StorageError, match="does not exist"):
        make_durable([path])


def test_foreign_pipeline_and_schema_are_refused(tmp_path: Path, topo: Topology) -> None:
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(checkpoints=[(CheckpointMeta.build(topo, "agg", down(E, 1)), [])]))
    other = Topology.build({"x": E}, [])
    with pytest.raises(StorageError, match="does not have"):
        store.checkpoints(other)
    store.close()
    db = sqlite3.connect(tmp_path / "meta.sqlite")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")  # a newer Falkirk's
    db.close()
    with pytest.raises(StorageError, match=f"schema {SCHEMA_VERSION + 1}"):
        MetaStore(tmp_path)


WRITER = """
import sys
from falkirk.recovery import CheckpointMeta, Topology
from falkirk.storage import CommitBatch, MetaStore
from falkirk.time import EpochDomain, Frontier
E = EpochDomain()
topo = Topology.build({"src": E, "agg": E}, [("e", "src", "agg", "identity")])
store = MetaStore(sys.argv[1])
for epoch in range(1, 100000):
    meta = CheckpointMeta.build(topo, "agg", Frontier.down(E, [epoch]))
    store.commit(CommitBatch(checkpoints=[(meta, [])], offsets=[("src", epoch, [epoch])],
                             sink_commits=[("agg", epoch, [])]))
    if epoch == 1:
        print("running", flush=True)
"""


@pytest.mark.parametrize("seed", range(3))
def test_sigkill_during_commits_leaves_whole_batches(tmp_path: Path, topo: Topology, seed: int) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "running"
    time.sleep(random.Random(seed).uniform(0.05, 0.6))
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=10)
    store = MetaStore(tmp_path)
    ckpt_epochs = [s.meta.frontier.maxima[0] for s in store.checkpoints(topo)["agg"]]
    assert ckpt_epochs, "the writer committed nothing before the kill"
    assert ckpt_epochs == list(range(1, len(ckpt_epochs) + 1))
    assert list(store.offsets("src")) == ckpt_epochs
    assert list(store.sink_commits("agg")) == ckpt_epochs


def test_a_flipped_bit_in_a_row_is_reported_not_used(tmp_path: Path) -> None:
    # Review: SQLite checks only its structure; a changed digit in an offset made a
    # restart re-read consumed input. Every row carries a CRC now.
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(offsets=[("src", 1, {"last": "clicks-00008.csv"})]))
    store.close()
    db = tmp_path / "meta.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    at = data.index(b"clicks-00008")
    data[at + 11] = ord("0")  # '8' -> '0': same size, still a valid database
    db.write_bytes(bytes(data))
    reopened = MetaStore(tmp_path)
    with pytest.raises(CorruptStorageError, match=r"source_offsets \('src', 1\) does not match its checksum"):
        reopened.offsets("src")


def test_a_truncated_database_is_named(tmp_path: Path) -> None:
    store = MetaStore(tmp_path)
    store.commit(CommitBatch(offsets=[("src", e, {"n": e}) for e in range(1, 200)]))
    store.close()
    db = tmp_path / "meta.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    with pytest.raises(CorruptStorageError, match=r"metadata .*meta.sqlite is damaged"):
        MetaStore(tmp_path).offsets("src")


def test_files_under_the_root_are_recorded_relative_to_it(tmp_path: Path) -> None:
    # Review: a copied or restored root pointed at the original's files (and its
    # garbage collection deleted them).
    root = tmp_path / "root"
    (stored,) = make_durable([data_file(root, "log.parquet")])
    outside = make_durable([data_file(tmp_path / "table", "epoch-1.parquet")])
    store = MetaStore(root, root=str(root))
    store.commit(CommitBatch(logs=[("a.out", Tick(1), [stored])], sink_commits=[("out", 1, outside)]))
    store.close()
    import shutil

    shutil.copytree(root, tmp_path / "copy")
    copy = MetaStore(tmp_path / "copy", root=str(tmp_path / "copy"))
    assert copy.logs("a.out")[Tick(1)][0].path == str(tmp_path / "copy" / "data" / "log.parquet")
    assert copy.sink_commits("out")[1][0].path == outside[0].path  # a table outside the root: as is


def test_a_schema_3_root_is_read_and_upgraded_with_its_rows_checked(tmp_path: Path) -> None:
    """Schema 3 keyed logs and state files by epoch alone: read as it is (read-only),
    upgraded when opened to write (every row checked against its old CRC first), and
    a damaged old row stops the upgrade, naming the table."""
    import json
    import sqlite3
    import zlib

    def old_crc(*values: object) -> int:
        return zlib.crc32(json.dumps(list(values)).encode())

    def make(directory: Path, *, damaged: bool = False) -> None:
        directory.mkdir()
        db = sqlite3.connect(directory / "meta.sqlite")
        db.executescript(
            "CREATE TABLE message_logs (edge TEXT NOT NULL, epoch INTEGER NOT NULL, files TEXT NOT NULL, crc INTEGER NOT NULL, PRIMARY KEY (edge, epoch));"
            "CREATE TABLE state_files (processor TEXT NOT NULL, epoch INTEGER NOT NULL, kind TEXT NOT NULL, files TEXT NOT NULL, crc INTEGER NOT NULL, PRIMARY KEY (processor, epoch));"
        )
        files = json.dumps([["@root/logs/a.out/e1/part-0.parquet", 10, "ab"]])
        db.execute("INSERT INTO message_logs VALUES (?, ?, ?, ?)", ("a.out", 1, files, old_crc("a.out", 1, files) + damaged))
        db.execute("INSERT INTO state_files VALUES (?, ?, ?, ?, ?)", ("agg", 2, "base", "[]", old_crc("agg", 2, "base", "[]")))
        db.execute("PRAGMA user_version=3")
        db.commit()
        db.close()

    make(tmp_path / "old")
    readonly = MetaStore(tmp_path / "old", read_only=True)
    assert list(readonly.logs("a.out")) == [Tick(1)] and readonly.state_files("agg") == [(Tick(2), "base", ())]
    readonly.close()
    store = MetaStore(tmp_path / "old")
    assert list(store.logs("a.out")) == [Tick(1)] and store.state_files("agg") == [(Tick(2), "base", ())]
    store.commit(CommitBatch(logs=[("a.out", Tick(2), []), ("loop.out", Tick(1, 3), [])], state=[("inloop", Tick(1, float("inf")), "delta", [])]))
    assert list(store.logs("loop.out")) == [Tick(1, 3)] and store.state_files("inloop")[0][0] == Tick(1, float("inf"))
    assert store.check_rows() == 5
    store.close()
    make(tmp_path / "bad", damaged=True)
    with pytest.raises(CorruptStorageError, match="message_logs"):
        MetaStore(tmp_path / "bad")


def test_a_root_whose_name_holds_uri_characters_is_opened_read_only_where_it_is(tmp_path: Path) -> None:
    # Issue 30, finding 8: the read-only URI was built unquoted, so root "qq?x" opened "qq" read-write.
    (tmp_path / "qq").mkdir()
    root = tmp_path / "qq?x#y"
    MetaStore(root).close()
    store = MetaStore(root, read_only=True)
    try:
        assert store.committed_epoch() is None
    finally:
        store.close()
    assert list((tmp_path / "qq").iterdir()) == [], "nothing created beside the root"


@pytest.mark.parametrize("name", ["qq?x", "a#b", "50%", "a b", "x?mode=rw"])
def test_read_only_opens_a_root_whatever_its_name(tmp_path: Path, name: str) -> None:
    """The read-only SQLite URI quotes the root's path (a root named ``qq?x`` opened
    ``qq`` read-write), and a path starting with ``//`` is not read as an authority."""
    import sqlite3

    from falkirk.storage.schema import read_only_uri

    root = tmp_path / name
    MetaStore(root).close()
    for spelling in (root / "meta.sqlite", "/" + str(root / "meta.sqlite")):  # "//tmp/...": the same file
        conn = sqlite3.connect(read_only_uri(spelling), uri=True)
        try:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                conn.execute("CREATE TABLE planted (x)")
        finally:
            conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
