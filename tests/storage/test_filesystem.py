"""The driver's file operations: what makes a committed name durable, renames that
cannot replace, checksums, and ``file:`` URIs treated as the local files they are
(finding 5 of the data-loss review: only a file's own folder was synced, and on Hadoop
roots "closed" was taken as durable, which ``file:`` does not honour)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from falkirk.storage import LocalFileSystem
from falkirk.storage import filesystem as fsmod
from falkirk.storage.filesystem import HadoopFileSystem, is_uri, local_path


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories fsynced, in order (and a fresh process-wide cache)."""
    calls: list[Path] = []
    monkeypatch.setattr(fsmod, "_durable_entries", set())
    real = fsmod._fsync_directory

    def record(directory: Path) -> None:
        calls.append(directory)
        real(directory)

    monkeypatch.setattr(fsmod, "_fsync_directory", record)
    return calls


def test_a_new_file_in_new_directories_is_durable_up_to_the_first_known_directory(tmp_path: Path, synced: list[Path]) -> None:
    nested = tmp_path / "root" / "logs" / "a.out" / "e1-abc"
    nested.mkdir(parents=True)
    (nested / "part-0.parquet").write_bytes(b"data")
    fsmod._durable_entries.add(tmp_path)  # known durable already
    (stored,) = LocalFileSystem().make_durable([str(nested / "part-0.parquet")])
    # the file's name in e1-abc, then each new directory's name in its parent
    assert synced == [nested, nested.parent, nested.parent.parent, tmp_path / "root", tmp_path]
    assert stored.size == 4 and stored.sha256 == hashlib.sha256(b"data").hexdigest()
    synced.clear()
    (nested / "part-1.parquet").write_bytes(b"more")
    LocalFileSystem().make_durable([str(nested / "part-1.parquet")])
    assert synced == [nested]  # the directories above are known durable now


def test_mkdirs_makes_the_new_directories_durable(tmp_path: Path, synced: list[Path]) -> None:
    fsmod._durable_entries.add(tmp_path)
    LocalFileSystem().mkdirs(str(tmp_path / "a" / "b"))
    assert synced == [tmp_path / "a", tmp_path]


def test_file_uris_are_synced_as_local_files(spark, tmp_path: Path, synced: list[Path]) -> None:  # type: ignore[no-untyped-def]
    fs = HadoopFileSystem(spark)
    target = tmp_path / "d" / "f.bin"
    target.parent.mkdir()
    target.write_bytes(b"x" * 10)
    fsmod._durable_entries.add(tmp_path)
    (stored,) = fs.make_durable([fs.spelling(f"file://{target}")])
    assert synced == [target.parent, tmp_path]
    assert stored.path == f"file:{target}" and stored.sha256 == hashlib.sha256(b"x" * 10).hexdigest()


@pytest.mark.parametrize("hadoop", [False, True], ids=["local", "file-uri"])
def test_rename_new_never_replaces(spark, tmp_path: Path, hadoop: bool) -> None:  # type: ignore[no-untyped-def]
    fs = HadoopFileSystem(spark) if hadoop else LocalFileSystem()
    prefix = "file:" if hadoop else ""
    (tmp_path / "a").write_text("first")
    (tmp_path / "b").write_text("second")
    assert fs.rename_new(f"{prefix}{tmp_path / 'a'}", f"{prefix}{tmp_path / 'c'}")
    assert not fs.rename_new(f"{prefix}{tmp_path / 'b'}", f"{prefix}{tmp_path / 'c'}")
    assert (tmp_path / "c").read_text() == "first" and (tmp_path / "b").read_text() == "second"
    assert not (tmp_path / "a").exists()


def test_uri_spellings() -> None:
    assert is_uri("file:///tmp/x") and is_uri("file:/tmp/x") and is_uri("hdfs://nn/x")
    assert not is_uri("/tmp/x") and not is_uri("relative/x")
    assert local_path("file:///tmp/x") == local_path("file:/tmp/x") == "/tmp/x"
    assert local_path("file://localhost/tmp/x") == "/tmp/x"
    assert local_path("hdfs://nn/x") is None
    assert os.path.isabs(local_path("file:/") or "")
