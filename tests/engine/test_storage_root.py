"""The storage root a run holds (falkirk.runtime.root): one holder at a time, whatever
the root's spelling, and the hold let go however the run ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from falkirk.runtime.root import StorageRoot
from falkirk.storage import StorageInUseError


def test_a_held_root_refuses_a_second_holder_until_let_go(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first, second = StorageRoot(tmp_path / "state", spark), StorageRoot(tmp_path / "state", spark)
    with pytest.raises(RuntimeError, match="the run failed"), first.held(wait=False):
        with pytest.raises(StorageInUseError), second.held(wait=False):
            pass
        raise RuntimeError("the run failed")
    with second.held(wait=False):  # the failed run let go
        pass


def test_a_file_uri_root_holds_the_directory_it_names(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same directory given as a ``file:`` URI (its metadata worked on elsewhere)
    and as a path is one root: holding either refuses the other."""
    as_uri = StorageRoot(f"file://{tmp_path / 'state'}", spark, metadata_dir=tmp_path / "meta")
    as_path = StorageRoot(tmp_path / "state", spark)
    assert as_uri.published is not None and as_path.published is None
    (tmp_path / "state").mkdir()
    with as_uri.held(wait=False), pytest.raises(StorageInUseError), as_path.held(wait=False):
        pass
    with as_path.held(wait=False):
        pass
