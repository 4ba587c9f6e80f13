"""Garbage: committed files no rollback can need any more, and files of crashed attempts.

The monitor's low-watermarks say which checkpoints and logs are below every frontier a
rollback could choose; :func:`forgettable` turns its decisions into the metadata to
forget, :func:`delete` removes the files once forgotten, and :func:`sweep` removes data
directories that no commit names (written by an attempt that crashed before its commit).
"""

from __future__ import annotations

from typing import Any

from falkirk.graph import Pipeline
from falkirk.recovery import DecisionKind
from falkirk.storage import MetaStore, StoredFile
from falkirk.storage.filesystem import FileSystem, part_files
from falkirk.time import Frontier


def forgettable(
    decisions: list[Any], low_watermarks: dict[str, int], store: MetaStore, pipeline: Pipeline
) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[tuple[str, Frontier]]]:
    """``(logs, state files, checkpoint records)`` the monitor's collect decisions
    allow to forget. State files go only below the newest base checkpoint at or below
    the low-watermark (a delta is useless without its base)."""
    checkpoints: list[tuple[str, Frontier]] = []
    state: list[tuple[str, int]] = []
    logs: list[tuple[str, int]] = []
    for d in decisions:
        if d.kind is DecisionKind.COLLECT_CHECKPOINTS:
            checkpoints += [(d.processor, f) for f in d.frontiers]
            chain = store.state_files(d.processor)
            bases = [t for t, kind, _ in chain if kind == "base" and t <= low_watermarks[d.processor]]
            if bases:
                state += [(d.processor, t) for t, _, _ in chain if t < max(bases)]
        elif d.kind is DecisionKind.COLLECT_LOG and d.edge is not None:
            key = d.edge.split(">")[0]
            src, port = key.split(".")
            upto = min(low_watermarks[q.name] for q in pipeline.consumers(src, port))
            logs += [(key, t) for t in store.logs(key) if t <= upto]
    return sorted(set(logs)), state, checkpoints


#: The areas of a storage root that hold write directories (see write_parquet).
AREAS = ("logs", "checkpoints")


def delete(fs: FileSystem, root: str, files: list[StoredFile]) -> None:
    """Delete forgotten log and checkpoint files, and each one's write directory
    (``<root>/<area>/<owner>/<write>/``: write_parquet gives every write its own) once
    it holds no part file any more. No other directory is ever removed: a file outside
    those write directories (a sink's table holds its epoch files in the table
    itself) is deleted alone - deleting its folder once removed a whole output table."""
    parents: set[str] = set()
    for f in files:
        fs.delete(f.path)
        parents.add(f.path.rsplit("/", 1)[0])
    areas = {fs.join(root, area) for area in AREAS}
    for parent in parents:
        owner = parent.rsplit("/", 1)[0]
        if owner.rsplit("/", 1)[0] in areas and not part_files(fs, parent):
            fs.delete(parent)


def sweep(fs: FileSystem, root: str, store: MetaStore) -> None:
    """Delete the log and checkpoint directories under ``root`` that no commit names."""
    referenced = {f.rsplit("/", 1)[0] for f in store.referenced_files()}
    for area in AREAS:
        for owner, owner_is_dir in fs.children(fs.join(root, area)):
            if not owner_is_dir:
                continue
            for d, is_dir in fs.children(owner):
                if is_dir and d not in referenced:
                    fs.delete(d)
