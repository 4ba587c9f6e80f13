"""Who may read what Falkirk keeps on this machine: storage roots and its cache.

A storage root holds the users' records (logs and checkpoints) and the metadata that
recovery trusts; the cache (``$FALKIRK_CACHE``, by default ``$XDG_CACHE_HOME/falkirk``
or ``~/.cache/falkirk``) holds working copies of remote roots' metadata and the JVM
artefacts every Spark session loads (a class-data sharing archive, the placement
jar). So:

* a local storage root and the cache's folders are created ``0700`` and the files
  Falkirk writes itself there (``meta.sqlite``, the lock) ``0600``: other users of
  the machine read nothing (Spark's Parquet files inside get the process's umask,
  but a root of mode ``0700`` keeps everyone else out of them). With
  ``FALKIRK_SHARED_GROUP=1`` they are ``0750`` / ``0640`` instead: the group reads
  (e.g. operators running ``falkirk status``). An existing folder keeps its mode.
* a cached artefact is used only when :func:`trusted`: a regular file owned by this
  user, in a folder owned by this user, neither writable by the group or others;
  otherwise it is built again (someone else could have planted it, and the jar goes
  on every JVM's class path).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: ``1``: roots and the cache are readable by the group.
SHARED_GROUP = "FALKIRK_SHARED_GROUP"


def shared() -> bool:
    return os.environ.get(SHARED_GROUP, "0") == "1"


def dir_mode() -> int:
    """The mode of a folder Falkirk creates for a root or its cache."""
    return 0o750 if shared() else 0o700


def file_mode() -> int:
    """The mode of a file Falkirk writes itself in a root or its cache."""
    return 0o640 if shared() else 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder: created (with missing parents) with :func:`dir_mode` if
    it does not exist; an existing one keeps its mode."""
    folder = Path(path)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, dir_mode())
    return folder


def restrict(path: str | os.PathLike[str]) -> None:
    """Give a file Falkirk just created :func:`file_mode`."""
    os.chmod(path, file_mode())


def cache_dir(*parts: str) -> Path:
    """A folder of Falkirk's cache (see the module docstring), created private."""
    base = os.environ.get("FALKIRK_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "falkirk"
    private_dir(root)
    return private_dir(root.joinpath(*parts)) if parts else root


def _ours(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def trusted(path: str | os.PathLike[str]) -> bool:
    """Whether a cached file may be used: it is a regular file (not a link), and it
    and its folder are owned by this user and writable by nobody else."""
    try:
        st = os.lstat(path)
        parent = os.lstat(Path(path).parent)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and _ours(st) and stat.S_ISDIR(parent.st_mode) and _ours(parent)
