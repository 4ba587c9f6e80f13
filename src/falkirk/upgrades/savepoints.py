"""Savepoints: a pipeline's whole state at one epoch, named, self-describing, kept.

A savepoint is taken when a run ends cleanly with ``Engine.run(savepoint=True)`` or
``Engine.stop(savepoint=True)``: every epoch read is committed (those in flight
finished), and every keyed processor's state as of the last committed epoch ``S``
is written - whatever its policy - into a directory of the storage root::

    ROOT/savepoints/NAME/manifest.json
    ROOT/savepoints/NAME/state/PROCESSOR/eS-base-.../part-*.parquet

The manifest says what the files mean without the pipeline's code: the pipeline's
description (processors, policies, each state's signature), the number of state
partitions, every source's position after ``S``, the root's identity and the
pipeline's version history, and each state file with its size and SHA-256 (checked
before it is read). Paths in it are relative to the savepoint's directory, so the
directory can be copied to another storage root (``cp -r``, ``hadoop distcp``) and
restored there. The manifest is written last, atomically: a directory without one
is an unfinished savepoint (a run killed while taking it, or a copy not done yet),
ignored; a new savepoint of the same name clears it first, and nothing else deletes
it (it may be a copy in progress).

Garbage collection never removes a savepoint; ``falkirk savepoints STORAGE --drop
NAME`` does. A savepoint is what an upgrade starts a changed pipeline from
(:mod:`falkirk.upgrades.upgrade`). Pure Python: the files are written by Spark
elsewhere (:mod:`falkirk.execution.savepointing`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from falkirk.exceptions import FalkirkError
from falkirk.storage.filesystem import FileSystem, StoredFile, safe_relative

#: Version of the manifest's layout.
FORMAT = 1
#: The directory of a root's savepoints, and a savepoint's manifest.
DIRECTORY = "savepoints"
MANIFEST = "manifest.json"
#: What a savepoint may be named (a directory name on any file system).
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class SavepointError(FalkirkError):
    """A savepoint is missing, unfinished, damaged or cannot be taken; the message
    says which and what to do."""


@dataclass(frozen=True)
class SavedState:
    """One keyed processor's state in a savepoint: its files (paths relative to the
    savepoint's directory) and the tick ordinal they restore."""

    ordinal: int
    files: tuple[StoredFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {"ordinal": self.ordinal, "files": [[f.path, f.size, f.sha256] for f in self.files]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SavedState:
        files = tuple(StoredFile(str(p), int(s), None if h is None else str(h)) for p, s, h in data["files"])
        for f in files:
            if not safe_relative(f.path):
                raise ValueError(f"file {f.path!r} is not a path inside the savepoint")
        return cls(int(data["ordinal"]), files)


@dataclass(frozen=True)
class Savepoint:
    """A savepoint's manifest (see the module docstring)."""

    name: str
    pipeline: str
    epoch: int
    created: str
    identity: str | None
    partitions: int
    description: Mapping[str, Any]
    states: Mapping[str, SavedState]
    #: Each source's position after ``epoch`` (its offsets as the ledger keeps them).
    sources: Mapping[str, Any]
    #: The pipeline's versions so far (the description's ``history``).
    history: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "pipeline": self.pipeline,
            "epoch": self.epoch,
            "created": self.created,
            "identity": self.identity,
            "partitions": self.partitions,
            "description": dict(self.description),
            "states": {name: s.to_json() for name, s in self.states.items()},
            "sources": dict(self.sources),
            "history": list(self.history),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> Savepoint:
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            return cls(
                name=str(data["name"]),
                pipeline=str(data["pipeline"]),
                epoch=int(data["epoch"]),
                created=str(data["created"]),
                identity=None if data["identity"] is None else str(data["identity"]),
                partitions=int(data["partitions"]),
                description=dict(data["description"]),
                states={str(k): SavedState.from_json(v) for k, v in data["states"].items()},
                sources=dict(data["sources"]),
                history=tuple(dict(h) for h in data.get("history", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SavepointError(
                f"the savepoint manifest {where} cannot be read ({exc}): it is damaged or was written by another "
                "version of Falkirk; use another savepoint (falkirk savepoints STORAGE lists them)"
            ) from exc

    def signatures(self) -> dict[str, Any]:
        """Each keyed processor's recorded state signature (JSON), by name."""
        processors = self.description.get("processors", {})
        return {name: p["state"] for name, p in processors.items() if p.get("state") is not None}


def directory(fs: FileSystem, root: str, name: str | None = None) -> str:
    """The directory of the root's savepoints, or of savepoint ``name``."""
    base = fs.join(root, DIRECTORY)
    return base if name is None else fs.join(base, name)


def new_name(epoch: int, now: datetime | None = None) -> str:
    """A default name: the epoch and the time (UTC), e.g. ``e12-20261127T210501Z``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return f"e{epoch}-{stamp}"


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise SavepointError(
            f"savepoint name {name!r}: use letters, digits, '.', '_' and '-' (at most 100, starting with a letter or digit)"
        )
    return name


def publish(fs: FileSystem, root: str, savepoint: Savepoint) -> None:
    """Write the manifest of a savepoint whose files are in place: atomically, and
    never over an existing one."""
    where = directory(fs, root, savepoint.name)
    temporary = fs.join(where, f".{MANIFEST}.writing")
    fs.write_bytes(temporary, json.dumps(savepoint.to_json(), indent=1, sort_keys=True).encode())
    if not fs.rename_new(temporary, fs.join(where, MANIFEST)):
        fs.delete(temporary)
        raise SavepointError(f"savepoint {savepoint.name!r} exists already in {root}: choose another name")


def read(fs: FileSystem, root: str, name: str) -> Savepoint:
    """Savepoint ``name`` of the root (:class:`SavepointError` naming the ones there
    if it is missing or unfinished)."""
    where = fs.join(directory(fs, root, check_name(name)), MANIFEST)
    data = fs.read_bytes(where)
    if data is None:
        names = [s.name for s in listed(fs, root)]
        raise SavepointError(
            f"no savepoint {name!r} in {root} (a directory without {MANIFEST} is a savepoint whose writing was "
            f"interrupted); the savepoints there: {names or 'none'}"
        )
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise SavepointError(f"the savepoint manifest {where} is not JSON ({exc}): it is damaged; use another savepoint") from exc
    savepoint = Savepoint.from_json(parsed, where)
    if savepoint.name != name:
        raise SavepointError(f"the savepoint in {where} says it is {savepoint.name!r}: a directory was renamed; name it back")
    return savepoint


def listed(fs: FileSystem, root: str) -> list[Savepoint]:
    """The root's finished savepoints, oldest first (by epoch, then time). A damaged
    manifest raises: it is never skipped silently."""
    found = []
    for path, is_dir in fs.children(directory(fs, root)):  # (none: no savepoint yet)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if is_dir and NAME.match(name) and fs.read_bytes(fs.join(path, MANIFEST)) is not None:
            found.append(read(fs, root, name))
    return sorted(found, key=lambda s: (s.epoch, s.created))


def check_free(fs: FileSystem, root: str, name: str) -> None:
    """Refuse ``name`` for a new savepoint if the form is wrong or a finished
    savepoint has it (before a run spends its epochs, and before any file is written)."""
    check_name(name)
    if fs.read_bytes(fs.join(directory(fs, root, name), MANIFEST)) is not None:
        raise SavepointError(f"savepoint {name!r} exists already in {root}: choose another name (falkirk savepoints {root} lists them)")


def make_room(fs: FileSystem, root: str, name: str) -> str:
    """The directory for a new savepoint ``name`` (:func:`check_free`); what an
    unfinished one of that name left (a run killed while writing it) is deleted first."""
    check_free(fs, root, name)
    where = directory(fs, root, name)
    if fs.children(where):
        fs.delete_below(root, where)
    return where


def unfinished(fs: FileSystem, root: str) -> list[str]:
    """Directories of savepoints whose writing was interrupted (no manifest)."""
    return [path for path, is_dir in fs.children(directory(fs, root)) if is_dir and fs.read_bytes(fs.join(path, MANIFEST)) is None]


def drop(fs: FileSystem, root: str, name: str) -> None:
    """Delete savepoint ``name`` (:class:`SavepointError` if there is none)."""
    read(fs, root, name)
    fs.delete_below(root, directory(fs, root, name))


def absolute(fs: FileSystem, root: str, savepoint: Savepoint, files: tuple[StoredFile, ...]) -> list[StoredFile]:
    """``files`` of ``savepoint`` (relative to its directory) as paths to read."""
    where = directory(fs, root, savepoint.name)
    return [StoredFile(fs.join(where, f.path), f.size, f.sha256) for f in files]

