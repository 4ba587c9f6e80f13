"""Garbage: committed files no rollback can need any more, and files of crashed attempts.

The monitor's low-watermarks say which checkpoints and logs are below every frontier a
rollback could choose (the ledger turns its decisions into the metadata to forget);
:func:`delete` removes the files once forgotten, and :func:`sweep` removes data
directories that no commit names (written by an attempt that crashed before its commit).
"""

from __future__ import annotations

from falkirk.storage import CorruptStorageError, MetaStore, StoredFile
from falkirk.storage.filesystem import FileSystem, OutsideRootError, part_files, within

#: The areas of a storage root that hold write directories (see write_parquet): logs,
#: checkpoints and the quarantine table's rows (a write an epoch's commit never named -
#: the epoch was discarded and run again - is swept like any other).
AREAS = ("logs", "checkpoints", "quarantine")


def delete(fs: FileSystem, root: str, files: list[StoredFile]) -> None:
    """Delete forgotten log and checkpoint files, and each one's write directory
    (``<root>/<area>/<owner>/<write>/``: write_parquet gives every write its own) once
    it holds no part file any more. No other directory is ever removed: a file outside
    those write directories (a sink's table holds its epoch files in the table
    itself) is deleted alone - deleting its folder once removed a whole output table.
    Nothing outside the root is ever deleted: a forgotten file the metadata names
    outside it (through ``..`` or a symbolic link) stops the run with a
    :class:`CorruptStorageError`."""
    parents: set[str] = set()
    for f in files:
        _check_inside(fs, root, f.path)
        _delete(fs, root, f.path)
        parents.add(f.path.rsplit("/", 1)[0])
    areas = {fs.join(root, area) for area in AREAS}
    for parent in parents:
        owner = parent.rsplit("/", 1)[0]
        if owner.rsplit("/", 1)[0] in areas and not part_files(fs, parent) and within(fs, root, parent):
            _delete(fs, root, parent)


def _delete(fs: FileSystem, root: str, path: str) -> None:
    """Delete ``path`` below ``root``, reached without links (checked as deleted:
    a link swapped in after the check above cannot lead outside)."""
    try:
        fs.delete_below(root, path)
    except OutsideRootError as exc:
        raise CorruptStorageError(
            f"the storage root {root} changed while its garbage was collected: {exc}. Nothing outside the root "
            "was deleted; something other than Falkirk writes into the root."
        ) from None


def sweep(fs: FileSystem, root: str, store: MetaStore) -> None:
    """Delete the log and checkpoint directories under ``root`` that no commit names
    (never through a symbolic link: :meth:`FileSystem.children` lists none as a
    directory, and each deletion is checked to lie inside the root)."""
    referenced = {f.rsplit("/", 1)[0] for f in store.referenced_files()}
    for area in AREAS:
        for owner, owner_is_dir in fs.children(fs.join(root, area)):
            if not owner_is_dir:
                continue
            for d, is_dir in fs.children(owner):
                if is_dir and d not in referenced and within(fs, root, d):
                    _delete(fs, root, d)


def _check_inside(fs: FileSystem, root: str, path: str) -> None:
    if not within(fs, root, path):
        raise CorruptStorageError(
            f"the metadata of storage root {root} names {path} as a file to delete, outside the root: nothing "
            "outside a root is ever deleted. The metadata was changed by something other than Falkirk; restore "
            "the root from a backup"
        )
