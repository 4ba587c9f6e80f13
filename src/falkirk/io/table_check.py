"""Checking a :class:`~falkirk.io.sinks.ParquetTableSink` table against the epochs its
storage root committed to the sink (``falkirk verify STORAGE TABLE``).

A table holds one ``epoch-<n>.parquet`` file per epoch, each with a hidden sidecar
``.epoch-<n>.parquet.sha256`` recording its size and SHA-256; the sidecar becomes
visible before its file (see :mod:`falkirk.io.sinks`). Given the epochs the root
committed to the sink (:class:`Committed`, kept by the root however far it prunes
its per-epoch records), :func:`verify_table` reports as damage:

* **missing** - a committed epoch whose file is neither in the table nor (visibility
  ``"released"``: committed, not released yet; ``"committed"``: a crash came between
  the commit and the move, which the next run makes) in its ``_pending`` folder;
* **orphaned** - the same, with the epoch's sidecar left behind (the file was
  deleted or lost);
* **torn** - a sidecar that is empty or not a checksum record: its file cannot be
  checked;
* **damaged** - a file whose size or SHA-256 differs from its sidecar's;
* **unrecorded** - a file without a sidecar (written by a Falkirk before sidecars).

Not damage, and reported as notes at most: a file or sidecar of an epoch past the
last committed one (visibility ``"written"`` shows an epoch before its commit, and a
rollback past committed epochs leaves their files in place until the replay rewrites
them; a crash between a sidecar and its file leaves the sidecar alone; the next run
writes the epoch again), and anything before the committed range - the empty schema file
``epoch-0000000000.parquet`` the sink writes first, and epochs a root upgraded from
before schema 6 had pruned before it knew ranges - which is checked against its
sidecar when both are there but never required. Without :class:`Committed` (a table
checked without its root) the files present are checked, and nothing is required.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from falkirk.io.sinks import PENDING, VISIBILITIES, checksum_file, epoch_name
from falkirk.storage import CorruptStorageError, StoredFile, verify_files
from falkirk.storage.filesystem import FileSystem

_FILE = re.compile(r"^epoch-(\d+)\.parquet$")
_SIDECAR = re.compile(r"^\.epoch-(\d+)\.parquet\.sha256$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ProblemKind(enum.Enum):
    """What is wrong with a table (see the module docstring)."""

    MISSING = "missing"
    ORPHANED = "orphaned"
    TORN = "torn"
    DAMAGED = "damaged"
    UNRECORDED = "unrecorded"


@dataclass(frozen=True)
class Committed:
    """What a storage root committed to a table's sink: the sink's name, the epochs
    committed to it (empty: none yet) and its visibility."""

    sink: str
    epochs: range
    visibility: str = "committed"

    def __post_init__(self) -> None:
        if self.visibility not in VISIBILITIES:
            raise ValueError(f"Committed({self.sink!r}): visibility must be one of {VISIBILITIES}, got {self.visibility!r}")
        if self.epochs.step != 1:
            raise ValueError(f"Committed({self.sink!r}): epochs must be a range of step 1, got {self.epochs!r}")

    def describe(self) -> str:
        """The range in words, for messages."""
        if not self.epochs:
            return f"no epoch is committed to sink {self.sink!r}"
        return f"epochs {self.epochs.start}-{self.epochs[-1]} are committed to sink {self.sink!r}"


@dataclass(frozen=True)
class TableProblem:
    """One problem: its kind, the epochs it concerns (first, last) and a message
    that says what was seen and how to fix it."""

    kind: ProblemKind
    epochs: tuple[int, int]
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class TableReport:
    """What :func:`verify_table` found: ``checked`` files (of epochs up to the last
    committed one) against their sidecars, ``problems`` (damage) and ``notes``
    (what is not damage but worth knowing)."""

    directory: str
    checked: int = 0
    problems: list[TableProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems


@dataclass
class _Listing:
    """The epoch files and sidecars of one folder, by epoch."""

    files: dict[int, str] = field(default_factory=dict)
    sidecars: dict[int, str] = field(default_factory=dict)


def _list(fs: FileSystem, directory: str) -> _Listing:
    listing = _Listing()
    for path, is_dir in fs.children(directory):
        name = path.rsplit("/", 1)[-1]
        if is_dir:
            continue
        if m := _FILE.match(name):
            listing.files[int(m.group(1))] = path
        elif m := _SIDECAR.match(name):
            listing.sidecars[int(m.group(1))] = path
    return listing


def epochs_in(fs: FileSystem, directory: str) -> list[int]:
    """The epochs whose files the table in ``directory`` holds (released or
    pending), in order; none for a table not written yet."""
    return sorted({*_list(fs, directory).files, *_list(fs, fs.join(directory, PENDING)).files})


def verify_table(fs: FileSystem, directory: str, committed: Committed | None = None) -> TableReport:
    """Check the table in ``directory`` against the epochs ``committed`` to its sink
    (None: check the files present only). Reads the files, changes nothing; every
    problem is returned, none raised (a torn sidecar included). Safe while the
    pipeline runs: an epoch released during the check is found where it went."""
    released = committed is not None and committed.visibility != "written"
    # Pending first: a release moves an epoch from there into the table, so listed in
    # this order it is seen at least once.
    pending = _list(fs, fs.join(directory, PENDING)) if released else _Listing()
    table = _list(fs, directory)
    report = TableReport(directory)
    for epoch, path, sidecar in _files(table, pending):
        _check_one(fs, report, committed, epoch, (path, sidecar), fs.join(directory, epoch_name(epoch)))
    if committed is not None:
        report.problems += _absent(directory, committed, table, pending)
    report.notes += _stray_sidecars(committed, table, pending)
    return report


def _files(table: _Listing, pending: _Listing) -> list[tuple[int, str, str | None]]:
    """(epoch, file, its sidecar) of every epoch file, in the table then pending (a
    pending one only if not in the table: a release moved it meanwhile). A pending
    file's sidecar may be in the table already: a release moves it first."""
    found: list[tuple[int, str, str | None]] = [(e, path, table.sidecars.get(e)) for e, path in sorted(table.files.items())]
    for e, path in sorted(pending.files.items()):
        if e not in table.files:
            found.append((e, path, pending.sidecars.get(e, table.sidecars.get(e))))
    return found


def _check_one(fs: FileSystem, report: TableReport, committed: Committed | None, epoch: int, file: tuple[str, str | None], released: str) -> None:
    """Check one file (and its sidecar) against its sidecar; a pending file released
    since it was listed is checked where it went (``released``). Past the committed
    range, a problem is only a note."""
    path, sidecar = file
    problem = _check_file(fs, epoch, path, sidecar)
    if problem is not None and path != released and fs.size(path) is None:
        path, sidecar = released, checksum_file(fs, released)
        problem = _check_file(fs, epoch, path, sidecar)
    if committed is None or epoch < committed.epochs.stop:
        report.checked += 1
        if problem is not None:
            report.problems.append(problem)
        return
    why = f"epoch {epoch} is past the committed ones ({committed.describe()}): written before its commit, not committed data; the next run writes it again"
    report.notes.append(f"{path}: {why}" if problem is None else f"{problem} - not damage: {why}")


def _check_file(fs: FileSystem, epoch: int, path: str, sidecar: str | None) -> TableProblem | None:
    """The problem of one epoch file against its sidecar (None: the file is as its
    sidecar records)."""
    raw = None if sidecar is None else fs.read_bytes(sidecar)
    if sidecar is None or raw is None:
        return TableProblem(
            ProblemKind.UNRECORDED,
            (epoch, epoch),
            f"{path} has no recorded checksum (written by an older Falkirk?): it cannot be checked",
        )
    record = _record(raw)
    if record is None:
        what = "0 bytes" if not raw else f"{len(raw)} bytes, not a size and SHA-256 record"
        return TableProblem(
            ProblemKind.TORN,
            (epoch, epoch),
            f"sidecar {sidecar} is torn ({what}): epoch {epoch}'s file {path} cannot be checked. "
            "A write of it was interrupted (a full disk?) or it was damaged since; restore the file and its "
            "sidecar from a backup of the table",
        )
    try:
        verify_files([StoredFile(path, int(record["size"]), str(record["sha256"]))], fs)
    except CorruptStorageError as exc:
        return TableProblem(ProblemKind.DAMAGED, (epoch, epoch), str(exc))
    return None


def _record(raw: bytes) -> dict[str, Any] | None:
    """A sidecar's record, or None if it is torn (empty, not JSON, or not a record)."""
    try:
        record = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return None
    if not isinstance(record, dict):
        return None
    size, sha256 = record.get("size"), record.get("sha256")
    if not isinstance(size, int) or size < 0 or not isinstance(sha256, str) or not _SHA256.match(sha256):
        return None
    return record


def _absent(directory: str, committed: Committed, table: _Listing, pending: _Listing) -> list[TableProblem]:
    """Committed epochs whose file is nowhere: missing, or orphaned when a sidecar
    of theirs is left (one problem per run of consecutive epochs)."""
    problems: list[TableProblem] = []
    present = table.files.keys() | pending.files.keys()
    sidecars = table.sidecars.keys() | pending.sidecars.keys()
    absent = [(e, e in sidecars) for e in committed.epochs if e not in present]
    for (first, orphaned), last in _runs(absent):
        one = first == last
        span = f"epoch {first} is" if one else f"epochs {first}-{last} are"
        where = directory + (f" (and its {PENDING}/ folder)" if committed.visibility != "written" else "")
        files = "the epoch file is" if one else "the epoch files are"
        if orphaned:
            kind, what = ProblemKind.ORPHANED, f"{files} gone while {'its sidecar remains' if one else 'their sidecars remain'}"
        else:
            kind, what = ProblemKind.MISSING, f"{files} gone, {'its sidecar' if one else 'their sidecars'} too"
        message = (
            f"{span} missing from {where}: committed to sink {committed.sink!r}, but {what} "
            "(deleted or lost after the commit; no run writes a committed epoch again). "
            "Restore the table from a backup"
        )
        problems.append(TableProblem(kind, (first, last), message))
    return problems


def _runs(items: Iterable[tuple[int, bool]]) -> list[tuple[tuple[int, bool], int]]:
    """Runs of consecutive epochs of the same flag: ((first, flag), last)."""
    runs: list[tuple[tuple[int, bool], int]] = []
    for epoch, flag in items:
        if runs and runs[-1][1] == epoch - 1 and runs[-1][0][1] == flag:
            runs[-1] = (runs[-1][0], epoch)
        else:
            runs.append(((epoch, flag), epoch))
    return runs


def _stray_sidecars(committed: Committed | None, table: _Listing, pending: _Listing) -> list[str]:
    """Notes on sidecars without a file outside the committed range (inside it they
    are orphaned epochs: :func:`_absent`)."""
    notes: list[str] = []
    present = table.files.keys() | pending.files.keys()
    for listing in (table, pending):
        for epoch, sidecar in sorted(listing.sidecars.items()):
            if epoch in present or (committed is not None and epoch in committed.epochs):
                continue
            if committed is None:
                why = "a missing epoch, or a write interrupted before its file: check the table with its storage root"
            elif epoch >= committed.epochs.stop:
                why = f"epoch {epoch} is past the committed ones ({committed.describe()}): a write interrupted before its file, not damage"
            else:
                why = f"epoch {epoch} is before the range the root records ({committed.describe()}): not checked"
            notes.append(f"sidecar {sidecar} has no epoch file: {why}")
    return notes
