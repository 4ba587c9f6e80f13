"""Roots and the cache are private, and cached JVM artefacts someone else could have
written are not used (issue 30, findings 6 and 7)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from falkirk.spark import cds
from falkirk.storage import MetaStore, RootLock
from falkirk.storage.permissions import UntrustedFolderError, cache_dir, trusted


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("shared", "dirs", "files"), [(False, 0o700, 0o600), (True, 0o750, 0o640)])
def test_a_new_root_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool, dirs: int, files: int) -> None:
    monkeypatch.setenv("FALKIRK_SHARED_GROUP", "1" if shared else "0")
    root = tmp_path / "state"
    with RootLock(root):
        MetaStore(root).close()
    assert mode(root) == dirs
    assert mode(root / "meta.sqlite") == files and mode(root / "falkirk.lock") == files
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    MetaStore(existing).close()
    assert mode(existing) == 0o755, "an existing folder keeps the mode its operator gave it"


def test_the_cache_is_private_and_planted_artefacts_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALKIRK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FALKIRK_CDS", "1")
    assert mode(cache_dir("cds")) == 0o700 and mode(tmp_path / "cache") == 0o700
    archive = cds.archive_path()
    archive.write_bytes(b"an archive")
    os.chmod(archive, 0o600)
    assert trusted(archive) and str(archive) in cds.java_options()
    os.chmod(archive, 0o666)  # anyone could have replaced it
    assert not trusted(archive) and cds.java_options() == ""
    os.chmod(archive, 0o600)
    os.chmod(archive.parent, 0o777)  # anyone could have swapped it
    assert not trusted(archive)
    os.chmod(archive.parent, 0o700)
    link = archive.with_name("link.jsa")
    link.symlink_to(archive)
    assert not trusted(link)
    if os.geteuid() == 0:  # a file of another user
        os.chown(archive, 65534, 65534)
        assert not trusted(archive)


def test_a_root_or_cache_folder_someone_else_may_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted first by another user in a shared folder (or left open), a root or the
    cache could have its metadata or jar replaced: refused, saying what to run."""
    monkeypatch.setenv("FALKIRK_SHARED_GROUP", "0")
    open_root = tmp_path / "open"
    open_root.mkdir()
    os.chmod(open_root, 0o777)
    with pytest.raises(UntrustedFolderError, match=r"mode 777: someone else could plant files .*chmod go-w"):
        RootLock(open_root).__enter__()
    with pytest.raises(UntrustedFolderError):
        MetaStore(open_root)
    assert list(open_root.iterdir()) == []  # nothing written there
    os.chmod(open_root, 0o770)
    monkeypatch.setenv("FALKIRK_SHARED_GROUP", "1")  # the group is let in
    MetaStore(open_root).close()
    monkeypatch.setenv("FALKIRK_SHARED_GROUP", "0")
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    monkeypatch.setenv("FALKIRK_CACHE", str(cache))
    with pytest.raises(UntrustedFolderError):
        cache_dir("jars")
    os.chmod(cache, 0o700)
    (cache / "jars").mkdir(mode=0o700)
    os.chmod(cache / "jars", 0o777)  # a level below, planted open
    with pytest.raises(UntrustedFolderError):
        cache_dir("jars")
    unsafe_parent = tmp_path / "shared-no-sticky"
    unsafe_parent.mkdir()
    (unsafe_parent / "cache").mkdir(mode=0o700)
    os.chmod(unsafe_parent, 0o777)  # anyone may rename the cache away and put theirs
    monkeypatch.setenv("FALKIRK_CACHE", str(unsafe_parent / "cache"))
    with pytest.raises(UntrustedFolderError, match="set FALKIRK_CACHE"):
        cache_dir()
    os.chmod(unsafe_parent, 0o1777)  # as /tmp: the sticky bit keeps others from it
    assert cache_dir() == unsafe_parent / "cache"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_root_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UntrustedFolderError, match="owned by uid 65534, not by you"):
        MetaStore(theirs)
