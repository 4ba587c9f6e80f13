"""Sources: cutting input into epochs, and re-reading an epoch exactly on replay.

:class:`FileSource` consumes the files of a directory in name order,
``files_per_epoch`` at a time; files may keep arriving. An epoch's offsets name its
files with the size and modification time each had when the epoch was planned; they
are committed before the epoch is processed, so a replay after a crash reads exactly
the same files, and a file changed or deleted since stops the pipeline with an
:class:`~falkirk.io.exceptions.InputChangedError` naming it (rather than silently
reading other rows). File names are read literally: ``[``, ``{``, ``*``, ``?`` are
characters, not patterns.

The offsets also hold the source's position - the greatest name consumed so far
and how many files sort at or before it - so planning an epoch needs the previous
epoch's offsets only, never the whole history (the metadata of a run of months stays
small). Consumption is in name order: a file that arrives with a name sorting
before one already consumed cannot be read in order any more and is reported
(:class:`~falkirk.io.exceptions.LateInputError`), never skipped silently - or, with
``late="set_aside"``, left unread and recorded with the next epoch (its name and the
reason; ``falkirk inspect ROOT quarantine``), so that a service goes on. A file
Spark cannot read stops the run with the reader's error, or with
``unreadable="set_aside"`` is left out of its epoch and recorded the same way.

A file put back after a deletion (from a backup, a copy) has its size but a new
modification time. With ``hash_content`` (the default) the engine commits the SHA-256
of each file an epoch read, taken by a Spark job while the epoch runs
(:mod:`falkirk.io.content_hashes`), and a replay that meets such a file hashes it once
more: the same bytes, and the replay goes on; other bytes, and it stops.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from falkirk.graph.exceptions import GraphError
from falkirk.io.content_hashes import (
    CONTENT_KEY,
    MAX_URI_HASHED_BYTES,
    hash_binary_files,
    hash_local_files,
)
from falkirk.io.directories import FileStat, InputDirectory, input_directory, normalise
from falkirk.io.exceptions import InputChangedError, LateInputError, SourceError
from falkirk.spark.errors import first_line
from falkirk.storage.filesystem import is_uri

FORMATS = ("csv", "json", "parquet", "text")
#: Characters Spark's reader treats as a glob pattern in a path.
GLOB_CHARACTERS = frozenset("{}[]*?\\")

Offsets = dict[str, Any]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileSource:
    """Files of ``path`` (``csv``, ``json``, ``parquet`` or ``text``) read with
    ``schema`` (a DDL string; ``value string`` for text, one row per line or, with
    option ``wholetext``, per file) and reader ``options``, in name order,
    ``files_per_epoch`` per epoch.
    Names starting with ``.`` or ``_`` (and ending in ``._COPYING_``, a Hadoop copy
    under way) are ignored: write a file under such a name
    and rename it when it is complete, so that no epoch reads it half-written.

    Guarantees: every file is read by exactly one epoch, and a replayed epoch reads
    exactly the files it read the first time, unchanged (same size and modification
    time, or - a file put back - same size and the same bytes by its committed hash),
    or stops with an :class:`~falkirk.io.exceptions.InputChangedError` naming the file."""

    path: str
    format: str
    schema: str
    files_per_epoch: int = 1
    options: Mapping[str, str] = field(default_factory=dict)
    #: What to do with a file once acknowledged (no recovery will read it again):
    #: ``"keep"`` it (the default: the input stays as it was given), ``"delete"`` it,
    #: or ``"move"`` it into ``archive``.
    acknowledged: str = "keep"
    archive: str | None = None
    #: What a late file (its name sorts before one already consumed) does: ``"stop"``
    #: the run with a :class:`~falkirk.io.exceptions.LateInputError` (the default), or
    #: ``"set_aside"``: left unread in the directory, recorded with the next epoch as
    #: set aside (its name and why), and the run goes on.
    late: str = "stop"
    #: What an unreadable file (Spark's reader fails on it: a damaged compressed file,
    #: a file of another format) does: ``"stop"`` the run with the reader's error (the
    #: default), or ``"set_aside"``: the epoch is read without it, and it is recorded
    #: with the epoch as set aside (its name and the error), left in the directory.
    unreadable: str = "stop"
    #: Commit the SHA-256 of each file an epoch read, taken by one Spark job in the
    #: background while the epoch runs (:mod:`falkirk.io.content_hashes`), so that a
    #: replay accepts a file put back byte for byte with a new modification time.
    #: False: such a file is refused until it gets its old modification time back
    #: (``touch -m -d``, which the error prints).
    hash_content: bool = True
    _directory: InputDirectory = field(init=False, repr=False, compare=False)
    #: Files accepted as put back in this process: (name, size, planned mtime) -> mtime now.
    _restored: dict[tuple[str, int, int], int] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", normalise(self.path))
        object.__setattr__(self, "_directory", input_directory(self.path))
        if self.acknowledged != "keep" and is_uri(self.path) and not self.path.startswith("file:"):
            raise GraphError(
                f"FileSource({self.path!r}): acknowledged={self.acknowledged!r} is refused on a Hadoop filesystem: it keeps no "
                "time a file was placed in the directory, and deleting consumed files would hide a late file from the "
                "check that reports it (it would never be read). Use acknowledged='keep' and clean up consumed input yourself"
            )
        if self.acknowledged not in ("keep", "delete", "move"):
            raise GraphError(f"FileSource({self.path!r}): acknowledged must be 'keep', 'delete' or 'move', got {self.acknowledged!r}")
        if (self.acknowledged == "move") != (self.archive is not None):
            raise GraphError(f"FileSource({self.path!r}): give archive=DIR exactly when acknowledged='move'")
        if self.archive is not None:
            archive = normalise(self.archive)
            if is_uri(archive) != is_uri(self.path):
                raise GraphError(f"FileSource({self.path!r}): the archive {archive!r} must be on the input's filesystem (both paths, or both URIs)")
            if archive.rsplit("/", 1)[0] == self.path.rstrip("/") and not archive.rsplit("/", 1)[-1].startswith((".", "_")):
                raise GraphError(f"FileSource({self.path!r}): an archive inside the input directory must be named '_...' or '.…' (else it is read as input)")
            object.__setattr__(self, "archive", archive)
        for option, value in (("late", self.late), ("unreadable", self.unreadable)):
            if value not in ("stop", "set_aside"):
                raise GraphError(f"FileSource({self.path!r}): {option} must be 'stop' or 'set_aside', got {value!r}")
        if self.format not in FORMATS:
            raise GraphError(f"FileSource({self.path!r}): format must be one of {FORMATS}, got {self.format!r}")
        if self.files_per_epoch < 1:
            raise GraphError(f"FileSource({self.path!r}): files_per_epoch must be >= 1")

    @property
    def hashes_content(self) -> bool:
        """Whether the engine should commit the hash of each file an epoch reads (see the module docstring)."""
        return self.hash_content

    def content_hashes(self, spark: SparkSession, files: list[list[Any]]) -> dict[str, str]:
        """The SHA-256 of each of ``files`` ([name, size, mtime] as planned) that can be
        read now, by name, read on the executors (:mod:`falkirk.io.content_hashes`):
        local files in chunks, others (at most ``MAX_URI_HASHED_BYTES``) as ``binaryFile``."""
        local = {f[0]: self._directory.local(f[0]) for f in files}
        hashes = hash_local_files(spark, {name: path for name, path in local.items() if path is not None})
        remote = [f[0] for f in files if local[f[0]] is None and 0 < f[1] <= MAX_URI_HASHED_BYTES]
        if remote:
            frames = [spark.read.format("binaryFile").option("__globPaths__", "false").load(group) for group in self._literal_groups(remote)]
            hashes.update(hash_binary_files(frames, remote))
        return hashes

    def struct(self, spark: SparkSession) -> StructType:
        return spark.createDataFrame([], self.schema).schema

    # -- planning -------------------------------------------------------------------

    def next_offsets(self, previous: Offsets | None) -> Offsets | None:
        """The next epoch's files after ``previous`` (the offsets of the last epoch
        that read from this source; None before the first), or None when no new file
        is there. Raises :class:`LateInputError` if a file arrived that sorts before
        one already consumed, and :class:`SourceError` for a name Spark cannot read."""
        for _ in range(5):
            try:
                return self._plan(previous)
            except _Vanished:  # a file deleted between the listing and its stat: list again
                continue
        raise SourceError(f"FileSource({self.path!r}): files keep disappearing while the next epoch is planned; is something deleting input?")

    def _plan(self, previous: Offsets | None) -> Offsets | None:
        planned_at = time.time_ns()  # before listing: anything placed after it is newer
        names = self._names()
        last: str | None = previous["last"] if previous else None
        older = [n for n in names if last is not None and n <= last]
        set_aside: list[list[str]] = []
        if previous is not None:
            late = self._late(older, previous)
            if late and (self.late == "stop" or "(unknown)" in late):
                raise LateInputError(self._late_message(late, previous))
            for name in late:  # late="set_aside": left unread, recorded with this epoch
                reason = f"arrived after {previous['last']!r}, which sorts after it, was consumed: left unread in the input directory"
                logger.warning("FileSource(%r): input %r %s", self.path, name, reason)
                set_aside.append([name, reason])
        fresh = sorted(n for n in names if last is None or n > last)[: self.files_per_epoch]
        if not fresh and not set_aside:
            return None
        files = []
        for name in fresh:
            _check_name(self.path, name)
            st = self._directory.stat(name)
            if st is None:
                raise _Vanished(name)
            files.append([name, st.size, st.modified_ns])
        seen = sorted([*older, *fresh])
        planned: Offsets = {
            "files": files, "last": fresh[-1] if fresh else last, "seen": len(seen), "names": _digest(seen),
            "planned_at_ns": planned_at, "path": self.path,
        }
        if set_aside:
            planned["set_aside"] = set_aside
        return planned

    def _names(self) -> list[str]:
        # Spark's file index skips names ending in "._COPYING_" (a Hadoop copy under
        # way) as it skips "." and "_" ones: planned, such a file would not be read.
        return [n for n in self._directory.names() if not n.startswith((".", "_")) and not n.endswith("._COPYING_")]

    def _late(self, older: list[str], previous: Offsets) -> list[str]:
        """Files sorting at or before the last one consumed that were not there when
        the previous epoch was planned. If the set of such names is unchanged (by its
        digest) there are none; else they are the ones placed in the directory (their
        inode changed: created, copied, renamed in) since that planning began - so a
        deleted consumed file cannot hide a late one, and a consumed file put back
        as it was is not new."""
        if _digest(sorted(older)) == previous.get("names"):
            return []
        since = int(previous.get("planned_at_ns", 0))
        just_read = {f[0] for f in previous["files"]}
        placed_since = [n for n in older if n not in just_read and self._directory.placed_ns(n) >= since]
        if placed_since or len(older) > previous["seen"]:
            return placed_since or ["(unknown)"]
        return []

    def _late_message(self, late: list[str], previous: Offsets) -> str:
        which = ", ".join(repr(n) for n in late[:5]) + (" ..." if len(late) > 5 else "")
        return (
            f"FileSource({self.path!r}): input {which} arrived after {previous['last']!r}, which "
            "sorts after it, was consumed. Files are read in name order, so it can no longer be "
            "read in order. Give new files names that sort after the last one (zero-padded numbers "
            "or timestamps) or move them away; or start with a fresh storage root to read everything "
            "again. (A consumed file renamed or copied in under another name counts as new; so does one put back "
            "while another consumed file is missing: put that one back too.)"
        )

    # -- reading --------------------------------------------------------------------

    def check(self, offsets: Offsets) -> None:
        """Raise :class:`InputChangedError` unless every file of ``offsets`` is there
        with the size and modification time it had when the epoch was planned - or
        with its size, a new modification time and the bytes of its committed hash
        (hashed once more: one Spark job for the epoch's files put back)."""
        put_back: list[tuple[str, int, int, FileStat]] = []
        for name, size, mtime_ns in offsets["files"]:
            st = self._directory.stat(name)
            if st is None:
                raise self._refused(
                    f"input file {str(self._directory.location(name))!r} was deleted after an epoch was planned to read it. "
                    f"{_REPLAY_ADVICE}", offsets,
                )  # fmt: skip
            if not st.regular:
                raise self._refused(
                    f"input file {str(self._directory.location(name))!r} is no longer a regular file (a directory or a "
                    f"device now) after an epoch was planned to read it. {_REPLAY_ADVICE}", offsets,
                )  # fmt: skip
            if st.size != size:
                raise self._changed(name, size, mtime_ns, st, "", offsets)
            if size and not self._same_file(name, size, mtime_ns, st):  # (an empty file is the one it read)
                put_back.append((name, size, mtime_ns, st))
        if not put_back:
            return
        recorded: dict[str, str] = offsets.get(CONTENT_KEY) or {}
        now: dict[str, str] = {}
        hashed = [[name, size, mtime_ns] for name, size, mtime_ns, _ in put_back if name in recorded]
        if hashed:
            try:
                now = self.content_hashes(_session(), hashed)
            except Exception as exc:  # unreadable now: not the file the epoch read
                logger.warning("FileSource(%r): input put back could not be read to hash it: %s", self.path, first_line(exc))
        for name, size, mtime_ns, st in put_back:
            if name in recorded and now.get(name) == recorded[name]:
                self._restored[(name, size, mtime_ns)] = st.modified_ns
                logger.info(
                    "FileSource(%r): input %r was put back with a new modification time, byte for byte the file "
                    "the epoch read (its SHA-256 is the one committed), so the replay reads it", self.path, name,
                )
                continue
            raise self._changed(name, size, mtime_ns, st, self._why_refused(name, size, mtime_ns, recorded, now), offsets)

    def _same_file(self, name: str, size: int, mtime_ns: int, st: FileStat) -> bool:
        """Whether ``st`` (of the size planned) is the file planned: its modification
        time, or the new one of the same bytes put back (see :meth:`check`)."""
        return same_time(st.modified_ns, mtime_ns) or self._restored.get((name, size, mtime_ns)) == st.modified_ns

    def _changed(self, name: str, size: int, mtime_ns: int, st: FileStat, why: str, offsets: Offsets) -> InputChangedError:
        return self._refused(
            f"input file {str(self._directory.location(name))!r} changed after an epoch was planned to read it (size "
            f"{size} -> {st.size} bytes, modified {_stamp(mtime_ns)} -> {_stamp(st.modified_ns)}). "
            f"{why}{_REPLAY_ADVICE} Write input under a name starting with '.' or '_' and rename it once it is complete.",
            offsets,
        )

    def _refused(self, found: str, offsets: Offsets) -> InputChangedError:
        """The error for input an epoch cannot read again as it was planned; when the
        epoch was planned on another input directory than this source's, that comes
        first: it is the likelier cause."""
        planned = offsets.get("path")
        if planned is None or planned == self.path:
            return InputChangedError(found)
        return InputChangedError(
            f"source path differs: this FileSource reads {self.path!r}, and the epochs this storage root committed "
            f"were planned on {planned!r}. If that is other input, this storage root belongs to a pipeline reading "
            "the first one: give this one a fresh storage root. If the input moved, its files must be there as they "
            f"were; here, {found[0].lower()}{found[1:]}"
        )

    def _why_refused(self, name: str, size: int, mtime_ns: int, recorded: dict[str, str], now: dict[str, str]) -> str:
        """Why a file with its size and a new modification time was not accepted as put back."""
        local = self._directory.local(name)
        if local is not None:
            touch = f"touch -m -d @{mtime_ns // 10**9}.{mtime_ns % 10**9:09d} {shlex.quote(local)}"
        else:  # hdfs:, s3a:...: no touch; the filesystem's own tools
            touch = f"set its modification time back to {_stamp(mtime_ns)} with the filesystem's tools"
        if name in recorded:
            how = "its bytes differ from the file the epoch read (another SHA-256)" if name in now else "it could not be read to hash it"
            return f"It has its size but {how}: put back the file the epoch read, with its modification time ({touch}). "
        if not self.hash_content:
            why = "hash_content=False"
        elif local is None and size > MAX_URI_HASHED_BYTES:
            why = f"a file outside the local filesystem over {MAX_URI_HASHED_BYTES >> 20} MiB is not hashed"
        else:
            why = "its epoch did not commit, or the file could not be read to hash it then"
        return (
            f"No hash of its bytes was committed ({why}) to tell whether it is the same file; if it is byte for "
            f"byte the one the epoch read, give it back its modification time ({touch}). "
        )

    def acknowledge(self, offsets: list[Offsets]) -> None:
        """Delete or archive the files of these epochs (``acknowledged``), each only
        if it is still the file the epoch read (same size and modification time).
        Idempotent: a file already gone or archived is skipped."""
        if self.acknowledged == "keep":
            return
        for o in offsets:
            for name, size, mtime_ns in o["files"]:
                st = self._directory.stat(name)
                if st is None or st.size != size or not self._same_file(name, size, mtime_ns, st):
                    continue  # gone, or not the file that was read: leave it to the user
                if self.archive is None:
                    self._directory.delete(name)
                else:
                    self._directory.move(name, self.archive)

    def read(self, spark: SparkSession, offsets: Offsets) -> DataFrame:
        """The rows of one epoch, from exactly the files it was planned with."""
        self.check(offsets)
        if not offsets["files"]:  # an epoch that only set late files aside
            return spark.createDataFrame([], self.schema)
        return self._read_files(spark, [name for name, _, _ in offsets["files"]])

    def _read_files(self, spark: SparkSession, names: list[str]) -> DataFrame:
        """The rows of the files ``names``, each read once, literally."""
        frames = [self._read(spark, group) for group in self._literal_groups(names)]
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out

    def _literal_groups(self, names: list[str]) -> list[list[str]]:
        """The paths of ``names`` in groups a reader with globbing off reads literally.
        Spark 4.0.1 with globbing off still repeats a path list once per path that looks
        like a pattern, so those are read one at a time."""
        paths = [self._directory.location(name) for name in names]
        plain = [p for p in paths if not GLOB_CHARACTERS & set(p)]
        return ([plain] if plain else []) + [[p] for p in paths if GLOB_CHARACTERS & set(p)]

    def _read(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        reader = spark.read.schema(self.schema).options(**self.options).option("__globPaths__", "false")
        # format().load(): DataFrameReader.text() would reset options such as wholetext
        return reader.format(self.format).load(paths)


class _Vanished(Exception):
    """A file listed for the next epoch was gone when it was examined."""


_REPLAY_ADVICE = (
    "Falkirk replays an epoch from exactly the input it was planned with, so it stops rather "
    "than read other rows. Put the original file back, or start with a fresh storage root "
    "(and fresh outputs) to process the input as it is now."
)


def _digest(names: list[str]) -> str:
    """A digest of a sorted list of names."""
    return hashlib.sha256("\0".join(names).encode("utf-8", "surrogateescape")).hexdigest()


def _check_name(directory: str, name: str) -> None:
    """Refuse a name Spark cannot be given (not valid UTF-8), naming it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise SourceError(
            f"FileSource({directory!r}): the file name {name.encode('utf-8', 'surrogateescape')!r} is not "
            "valid UTF-8, which Spark cannot read; rename it (its content is not read until then, "
            "and no later file is read before it)"
        ) from None


def _session() -> SparkSession:
    """The session to read input with outside an epoch's own read (a commit's check)."""
    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


def _stamp(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mtime_ns // 10**9)) + f".{mtime_ns % 10**9:09d} UTC"


def same_time(a_ns: int, b_ns: int) -> bool:
    """Whether two modification times are the same, at the precision of the coarser:
    Hadoop's file systems (a ``file:`` URI, ``hdfs:``) give milliseconds, a local
    path nanoseconds, and one root may be run with either spelling of its input."""
    if a_ns == b_ns:
        return True
    coarse = a_ns % 1_000_000 == 0 or b_ns % 1_000_000 == 0
    return coarse and a_ns // 1_000_000 == b_ns // 1_000_000
