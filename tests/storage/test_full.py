"""A full file system in the storage layer: said as a :class:`StorageFullError` of
one line that names the place (never as damage), and nothing committed is lost.
SQLite and the lock write to a real full tmpfs (tests/tmpfs.py)."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from falkirk.storage import CommitBatch, MetaStore, RootLock, StorageFullError
from falkirk.storage.full import Place, no_space, storage_full_error
from tests.tmpfs import fill, tmpfs


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", "1m") as mounted:
        yield mounted


def one_line(error: StorageFullError, path: Path) -> str:
    message = str(error)
    assert "\n" not in message and str(path) in message and f"df -h {path}" in message, message
    assert "then start the pipeline again: it recovers from the last commit, and nothing committed is lost" in message
    return message


def test_a_full_disk_at_a_new_root_is_not_called_damage(small: Path) -> None:
    fill(small)
    with pytest.raises(StorageFullError) as raised:  # it was "metadata ... is damaged"
        MetaStore(small / "state")
    message = one_line(raised.value, small / "state" / "meta.sqlite")
    assert message.startswith(f"the metadata database {small / 'state' / 'meta.sqlite'} is on a full file system ({small}: ")
    assert "SQLite: database or disk is full" in message and "damaged" not in message
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)


def test_a_commit_on_a_full_disk_keeps_every_earlier_commit(small: Path) -> None:
    store = MetaStore(small / "state")
    store.commit(CommitBatch(offsets=[("src", 1, {"at": 1})], epoch=1))
    filler = fill(small)
    big = CommitBatch(offsets=[("src", e, {"pad": "x" * 2000}) for e in range(2, 600)], epoch=599)
    with pytest.raises(StorageFullError) as raised:
        store.commit(big)
    one_line(raised.value, small / "state" / "meta.sqlite")
    assert store.committed_epoch() == 1 and store.offsets("src") == {1: {"at": 1}}
    filler.unlink()
    store.commit(CommitBatch(offsets=[("src", 2, {"at": 2})], epoch=2))  # space freed: commits go on
    store.close()
    again = MetaStore(small / "state")
    assert again.committed_epoch() == 2 and again.offsets("src") == {1: {"at": 1}, 2: {"at": 2}}


def test_a_lock_that_cannot_be_written_is_let_go(small: Path) -> None:
    filler = fill(small)
    with pytest.raises(OSError) as raised:
        RootLock(small / "state").acquire()
    filler.unlink()
    with RootLock(small / "state") as lock:  # this process does not refuse itself the root
        assert lock.held
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(small / "state" / "falkirk.lock")


JVM_TEXT = """An error occurred while calling o5482.parquet.
: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:{path}/e2-delta-83e2. SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:772)
Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device
\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write(RawLocalFileSystem.java:412)
"""


def places(tmp_path: Path) -> list[Place]:
    return [
        Place("the storage root", str(tmp_path / "state"), "move the storage root to a larger file system"),
        Place("the table of sink 'out'", str(tmp_path / "out"), "give the sink a table on a larger file system"),
        Place("the table of sink 'output'", str(tmp_path / "output"), "give the sink a table on a larger file system"),
    ]


def test_spark_errors_name_the_place_they_wrote_to(tmp_path: Path) -> None:
    try:
        try:
            raise RuntimeError(JVM_TEXT.format(path=tmp_path / "output" / "_staging-e2"))
        except RuntimeError as inner:
            raise ValueError("the epoch failed") from inner
    except ValueError as exc:
        error = storage_full_error(exc, places(tmp_path))
    assert error is not None
    message = one_line(error, tmp_path / "output")
    assert message.startswith(f"the table of sink 'output' {tmp_path / 'output'} is on a full file system (")
    assert "Spark: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device" in message
    assert "or give the sink a table on a larger file system;" in message


def test_python_errors_name_the_place_of_their_file(tmp_path: Path) -> None:
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "state" / "falkirk.lock"))
    error = storage_full_error(full, places(tmp_path))
    assert error is not None and str(error).startswith(f"the storage root {tmp_path / 'state'} is on a full file system")
    quota = storage_full_error(OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "out" / "x")), places(tmp_path))
    assert quota is not None and f"the table of sink 'out' {tmp_path / 'out'} is over its disk quota" in str(quota)
    assert "raise the quota or free space on" in str(quota)
    elsewhere = storage_full_error(OSError(errno.ENOSPC, "No space left on device", "/elsewhere/f"), places(tmp_path))
    assert elsewhere is not None and str(elsewhere).startswith("the file /elsewhere/f is on a full file system (/: ")


def test_a_python_error_inside_a_spark_task_names_its_place(tmp_path: Path) -> None:
    said = f"processor 'out' failed in a Spark task on epoch 3: OSError: [Errno 28] No space left on device: '{tmp_path / 'out' / 'f'}'"
    error = storage_full_error(RuntimeError(said), places(tmp_path))
    assert error is not None and str(error).startswith(f"the table of sink 'out' {tmp_path / 'out'} is on a full file system (")
    assert "; a Spark task: [Errno 28] No space left on device)" in str(error)


def test_other_errors_are_not_a_full_disk(tmp_path: Path) -> None:
    assert storage_full_error(OSError(errno.EACCES, "Permission denied", "/x"), places(tmp_path)) is None
    assert storage_full_error(sqlite3.OperationalError("database is locked"), places(tmp_path)) is None
    # A PostgreSQL server's full disk is that server's, not a file system the pipeline writes to.
    assert no_space(RuntimeError('could not extend file "base/16384/2619": No space left on device')) is None


def test_without_a_path_the_nearly_full_place_is_named(small: Path, tmp_path: Path) -> None:
    fill(small)
    known = [*places(tmp_path), Place("the metadata directory", str(small / "meta"), "give the engine a metadata_dir on a larger file system")]
    error = storage_full_error(sqlite3.OperationalError("database or disk is full"), known)
    assert error is not None and str(error).startswith(f"the metadata directory {small / 'meta'} is on a full file system ({small}: ")
