"""Roots and the cache are private, and cached JVM artefacts someone else could have
written are not used (issue 30, findings 6 and 7)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from falkirk.spark import cds
from falkirk.storage import MetaStore, RootLock
from falkirk.storage.permissions import cache_dir, trusted


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
