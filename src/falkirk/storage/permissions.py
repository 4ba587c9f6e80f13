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
  (e.g. operators running ``falkirk status``). An existing folder keeps its mode,
  but must be this user's and writable by nobody else (the group may write with
  ``FALKIRK_SHARED_GROUP=1``), or :class:`UntrustedFolderError` says what to run:
  someone else who can write a root or the cache can plant metadata or the jar.
  The folders above the cache must not let others replace it (writable by others
  only with the sticky bit, as ``/tmp``).
* a cached artefact is used only when :func:`trusted`: a regular file owned by this
  user, in a folder owned by this user, neither writable by the group or others;
  otherwise it is built again (someone else could have planted it, and the jar goes
  on every JVM's class path).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from falkirk.storage.exceptions import StorageError

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


class UntrustedFolderError(StorageError):
    """A root's or the cache's folder someone else owns or may write to."""


def private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder: created (with missing parents) with :func:`dir_mode` if
    it does not exist; an existing one keeps its mode but must be :func:`ours`
    (else :class:`UntrustedFolderError`)."""
    folder = Path(path)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, dir_mode())
    check_ours(folder)
    return folder


def check_ours(folder: Path) -> None:
    """Refuse a folder that is another user's, or that the group (unless
    ``FALKIRK_SHARED_GROUP=1``) or others may write to."""
    st = os.stat(folder)
    writable = stat.S_IWOTH | (0 if shared() or _private_group(st.st_gid) else stat.S_IWGRP)
    if st.st_uid != os.geteuid() or st.st_mode & writable:
        whose = "yours" if st.st_uid == os.geteuid() else f"owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
        raise UntrustedFolderError(
            f"{folder} is {whose} with mode {stat.S_IMODE(st.st_mode):o}: someone else could plant files there that "
            f"Falkirk trusts. Use a folder of your own (chmod go-w {folder}; FALKIRK_SHARED_GROUP=1 lets the group in)"
        )


def _private_group(gid: int) -> bool:
    """A user-private group (umask 002 systems): this user's own primary group, with
    no other members listed."""
    import grp

    if gid != os.getegid():
        return False
    try:
        return not [m for m in grp.getgrgid(gid).gr_mem if m != _user_name()]
    except KeyError:
        return False


def _user_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return ""


def _check_ancestors(folder: Path) -> None:
    """Refuse a cache whose parents let someone else rename or replace it."""
    for parent in folder.resolve().parents:
        st = os.stat(parent)
        others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if st.st_uid not in (0, os.geteuid()) or (others_write and not st.st_mode & stat.S_ISVTX):
            raise UntrustedFolderError(
                f"Falkirk's cache {folder} lies in {parent} (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}), "
                "which someone else may change: set FALKIRK_CACHE to a folder in your own home"
            )


def restrict(path: str | os.PathLike[str]) -> None:
    """Give a file Falkirk just created :func:`file_mode`."""
    os.chmod(path, file_mode())


def cache_dir(*parts: str) -> Path:
    """A folder of Falkirk's cache (see the module docstring), created private."""
    base = os.environ.get("FALKIRK_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "falkirk"
    private_dir(root)
    _check_ancestors(root)
    folder = root
    for part in parts:  # each level: a planted level above would hold the rest
        folder = private_dir(folder / part)
    return folder


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
