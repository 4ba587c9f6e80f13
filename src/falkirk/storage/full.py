"""A full file system, said in one line.

A pipeline writes to several file systems: its storage root (data files by Spark's
Parquet writers in the JVM, the metadata by SQLite), the metadata directory of a
URI root, each sink's table, and Spark's scratch directory (``spark.local.dir``:
shuffle files and spilled blocks). When one of them is full, the write fails deep
inside whichever layer made it: ``java.io.IOException: No space left on device`` in
a Spark job's failure (a ``Py4JJavaError`` of hundreds of lines), SQLite's
``database or disk is full``, or Python's ``OSError`` with errno ``ENOSPC``
(``EDQUOT`` past a disk quota). :func:`storage_full_error` turns any of them into a
:class:`~falkirk.storage.StorageFullError` of one line that names the place, its
mount point and free space, and what to do; the original stays chained as its
``__cause__``.

Nothing committed is lost by a full disk: a data file is written before the commit
that names it, and a commit that fails rolls back, so after space is freed a
restart recovers from the last commit as it does after any crash.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from falkirk.exceptions import error_text
from falkirk.storage.exceptions import StorageFullError
from falkirk.storage.filesystem import is_uri, local_path

#: The JVM's words for a full disk (Hadoop wraps them in ``FSError``).
_JVM_SAYS = re.compile(r"[\w.$]*(?:IOException|FileSystemException|FSError)\b[^\n]*?(?:No space left on device|Disk quota exceeded)")
#: Python's, when an ``OSError`` raised inside a Spark task arrives as text.
_PYTHON_SAYS = re.compile(rf"\[Errno (?:{errno.ENOSPC}|{errno.EDQUOT})\] (?:No space left on device|Disk quota exceeded)")
_SQLITE_FULL = "database or disk is full"
#: Below this share of free blocks a file system counts as full when the error
#: itself does not say which one was.
_NEARLY_FULL = 0.05


@dataclass(frozen=True)
class Place:
    """A directory (or file) written to for a pipeline, as its user knows it:
    ``what`` it is ("the storage root"), its ``path`` (local, or a URI) and how to
    ``move`` it to a larger file system. ``here``: the path is on this machine
    (false for an executor's scratch directory on a cluster)."""

    what: str
    path: str
    move: str
    here: bool = True

    @property
    def local(self) -> str | None:
        """The local path, if the place is on this machine."""
        if not self.here:
            return None
        return local_path(self.path) if is_uri(self.path) else self.path


@dataclass(frozen=True)
class NoSpace:
    """What an error says of a full file system."""

    #: The words that say so, one short line (``java.io.IOException: No space left on device``).
    evidence: str
    #: Past a disk quota rather than out of blocks.
    quota: bool
    #: The file being written, when the error carries it (``OSError.filename``).
    filename: str | None
    #: Every message of the error and those it was raised from (paths are found in it).
    text: str


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _text(exc: BaseException) -> str:
    return error_text(exc)  # a Py4JJavaError asks the JVM for its text, once


def _evidence(exc: BaseException, text: str) -> tuple[str, bool, str | None] | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"[Errno {exc.errno}] {exc.strerror}", exc.errno == errno.EDQUOT, exc.filename
    if isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or _SQLITE_FULL in text
    ):
        return f"SQLite: {_SQLITE_FULL}", False, None
    jvm, python = _JVM_SAYS.search(text), _PYTHON_SAYS.search(text)
    if jvm is not None:
        return f"Spark: {jvm.group(0).strip()[:200]}", "quota" in jvm.group(0), None
    if python is not None:
        return f"a Spark task: {python.group(0)}", "quota" in python.group(0), None
    return None


def no_space(exc: BaseException) -> NoSpace | None:
    """What ``exc`` (or an exception it was raised from) says of a full file system,
    or None if it says nothing of one."""
    texts, found = [], None
    for seen in _chain(exc):
        text = _text(seen)
        texts.append(text)
        found = found or _evidence(seen, text)
    if found is None:
        return None
    evidence, quota, filename = found
    return NoSpace(evidence, quota, filename, "\n".join(texts))


def storage_full_error(exc: BaseException, places: Sequence[Place]) -> StorageFullError | None:
    """A :class:`StorageFullError` of one line if ``exc`` (or an exception it was
    raised from) says a file system is full, else None. The place named is the one
    of ``places`` the error names a file of (the innermost, if several hold it);
    else the file the error names; else those of ``places`` whose file systems are
    nearly full now."""
    found = no_space(exc)
    if found is None:
        return None
    place = _named(found, places)
    if place is not None:
        return StorageFullError(_message(found, place))
    full = [p for p in places if _nearly_full(p)]
    if full:
        return StorageFullError(_message(found, full[0]))
    written = "; ".join(f"{p.what} {p.path}" for p in places) or "no place known"
    return StorageFullError(
        f"a file system the pipeline writes to is full ({found.evidence}), though none of those it knows is "
        f"nearly full now ({written}): free space where the pipeline writes (df -h each of them), then start "
        "the pipeline again: it recovers from the last commit, and nothing committed is lost"
    )


def _named(found: NoSpace, places: Sequence[Place]) -> Place | None:
    """The place whose path the error names (the longest path: the innermost)."""
    for place in sorted(places, key=lambda p: -len(p.path)):
        for spelled in {place.path.rstrip("/") or "/", (place.local or place.path).rstrip("/") or "/"}:
            if re.search(re.escape(spelled) + r"(?=$|[/\s'\".,;:)\]])", found.text):
                return place
            if found.filename is not None and (found.filename == spelled or found.filename.startswith(spelled + "/")):
                return place
    if found.filename is not None:
        return Place("the file", found.filename, "write it to a larger file system")
    return None


def _message(found: NoSpace, place: Place) -> str:
    """One line: the place, its file system and the evidence; what to do."""
    state = "is over its disk quota" if found.quota else "is on a full file system"
    then = "then start the pipeline again: it recovers from the last commit, and nothing committed is lost"
    local = place.local
    if local is None:
        where = "there" if place.here else f"on the executors' {place.path}"
        return f"{place.what} {place.path} {state} ({found.evidence}): free space {where} or {place.move}; {then}"
    room = "raise the quota or free space" if found.quota else "free space"
    try:
        mount, free, size = _usage(local)
    except OSError:  # cannot be measured: say what is known
        return f"{place.what} {place.path} {state} ({found.evidence}): {room} there (df -h {local}) or {place.move}; {then}"
    return (
        f"{place.what} {place.path} {state} ({mount}: {_size(free)} free of {_size(size)}; {found.evidence}): "
        f"{room} on {mount} (df -h {local}) or {place.move}; {then}"
    )


def _existing(path: str) -> Path:
    at = Path(os.path.realpath(path))
    while not at.exists() and at != at.parent:
        at = at.parent
    return at


def _usage(path: str) -> tuple[str, int, int]:
    """The mount point of ``path``'s file system, its free bytes (for an unprivileged
    writer) and its size."""
    at = _existing(path)
    mount = at
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    stat = os.statvfs(at)
    return str(mount), stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize


def _nearly_full(place: Place) -> bool:
    local = place.local
    if local is None:
        return False
    try:
        _, free, size = _usage(local)
    except OSError:
        return False
    return size > 0 and free < _NEARLY_FULL * size


def _size(n: int) -> str:
    """``n`` bytes as ``df -h`` would say it, in binary units."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
