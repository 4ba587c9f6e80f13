"""``falkirk savepoints STORAGE`` and ``falkirk savepoint STORAGE``: the savepoints of
a storage root, read without the pipeline's code (see :mod:`falkirk.upgrades.savepoints`)."""

from __future__ import annotations

from typing import Any

from falkirk.storage import MetaStore
from falkirk.storage.filesystem import LocalFileSystem, is_uri, local_path
from falkirk.upgrades import savepoints
from falkirk.upgrades.savepoints import SavepointError


def _local(storage: str) -> str:
    path = local_path(storage) if is_uri(storage) else storage
    if path is None:
        raise SavepointError(
            f"{storage}: falkirk savepoints reads a local storage root; for a root on a Hadoop filesystem, list "
            "ROOT/savepoints/ with the filesystem's tools (each savepoint's manifest.json describes it)"
        )
    return path


def listing(storage: str) -> list[dict[str, Any]]:
    """Each finished savepoint of the root, oldest first: name, epoch, when, the
    keyed processors it holds, its size."""
    fs, root = LocalFileSystem(), _local(storage)
    found = []
    for s in savepoints.listed(fs, root):
        size = sum(f.size for state in s.states.values() for f in state.files)
        found.append({"name": s.name, "epoch": s.epoch, "created": s.created, "processors": sorted(s.states), "bytes": size,
                      "partitions": s.partitions, "versions": len(s.history) + 1})  # fmt: skip
    return found


def render(found: list[dict[str, Any]], storage: str) -> str:
    if not found:
        return f"no savepoint in {storage}: a run ends with one with Engine.run(savepoint=True) or Engine.stop(savepoint=True)"
    lines = [f"{'name':<36} {'epoch':>6}  {'created (UTC)':<25} {'size':>10}  keyed processors"]
    for s in found:
        lines.append(f"{s['name']:<36} {s['epoch']:>6}  {s['created']:<25} {s['bytes']:>10}  {', '.join(s['processors']) or '-'}")
    return "\n".join(lines)


def drop(storage: str, name: str) -> None:
    """Delete savepoint ``name`` of the root (garbage collection never does)."""
    savepoints.drop(LocalFileSystem(), _local(storage), name)


def existing_cut(storage: str) -> str:
    """What ``falkirk savepoint STORAGE`` can do without the pipeline's code: name the
    savepoint at the root's last committed epoch, if one was taken (a clean stop
    with ``savepoint=True``). Writing one needs the pipeline's operators: otherwise
    :class:`SavepointError` says how to take one."""
    root = _local(storage)
    store = MetaStore(root, read_only=True)
    try:
        committed = store.committed_epoch()
    finally:
        store.close()
    at = [s for s in savepoints.listed(LocalFileSystem(), root) if s.epoch == committed]
    if committed is None:
        raise SavepointError(f"{storage}: nothing was committed there: there is no state to save")
    if not at:
        raise SavepointError(
            f"{storage}: no savepoint holds the last committed epoch ({committed}), and one cannot be written without "
            "the pipeline's code: run the pipeline to a clean stop with a savepoint (Engine.run(savepoint=True), "
            "Engine.stop(savepoint=True); the examples' --savepoint)"
        )
    return at[-1].name
