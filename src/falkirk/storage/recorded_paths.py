"""How the metadata records the files it names: paths under the storage root as
``@root/...`` (so a copied or restored root is whole by itself), and a recorded path
never followed out of the root.

Only a sink's files (``sink_commits``) may lie outside the root, as recorded: a sink's
table is where its user put it. A checkpoint, log or state file named outside the root
(by damage, or by someone who wrote the metadata) is refused with
:class:`~falkirk.storage.CorruptStorageError`, never read, copied or deleted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError
from falkirk.storage.filesystem import FileSystem, StoredFile, safe_relative


class RecordedPaths:
    """The files of one metadata database (``db``) under storage root ``root`` on ``fs``."""

    def __init__(self, root: str, fs: FileSystem, db: Path) -> None:
        self.root, self.fs, self.db = root, fs, db

    def to_json(self, files: Sequence[StoredFile]) -> str:
        """``files`` as a row's ``files`` column."""
        return json.dumps([[self.relative(f.path), f.size, f.sha256] for f in files])

    def from_json(self, raw: str, table: str) -> list[StoredFile]:
        """A ``files`` column of ``table`` read back (see :meth:`absolute`)."""
        return [StoredFile(self.absolute(path, table), size, digest) for path, size, digest in json.loads(raw)]

    def relative(self, path: str) -> str:
        """``path`` as recorded: ``@root/...`` under the root, as is elsewhere."""
        if path.startswith(self.root + "/"):
            return "@root/" + path[len(self.root) + 1 :]
        return path

    def absolute(self, path: str, table: str) -> str:
        """A recorded path as the file system spells it: under the root for
        ``@root/...`` (which must stay below it: no ``..``); outside it only for a
        sink's files (see the module)."""
        rel: str | None = None
        if path.startswith("@root/"):
            rel = path[len("@root/") :]
        elif path.startswith(self.root + "/"):  # written before paths were relative
            rel = path[len(self.root) + 1 :]
        elif table == "sink_commits":
            return path
        if rel is None or not safe_relative(rel):
            raise CorruptStorageError(
                f"metadata {self.db} names {path!r} in {table}, a file outside its storage root; it is not used. "
                "Restore the storage root from a backup, or start with a fresh one."
            )
        return self.fs.join(self.root, rel)
