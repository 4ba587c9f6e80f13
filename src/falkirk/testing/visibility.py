"""Checking, at every kill of a crash test, that no Parquet table shows an epoch the
storage root has not committed (``ParquetTableSink``'s ``visibility="committed"``
and ``"released"``).

:class:`CommittedOnly` reads, after each kill, the epochs the root committed to each
of its Parquet sinks (the range the root keeps however far it prunes, read from its
metadata like ``falkirk verify``) and the epoch files each table shows. A rollback
ends a sink's committed range where it rolled back while the files of the epochs
after it stay until the replay rewrites them, so the bound is the highest epoch
committed at any kill of the chain so far (every commit is followed by a kill or by
the end of the run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from falkirk.storage.filesystem import LocalFileSystem, local_path
from falkirk.storage.schema import DB_NAME
from falkirk.storage.verify import read_root

_EPOCH_FILE = re.compile(r"^epoch-(\d+)\.parquet$")


def shown_epochs(table: Path) -> list[int]:
    """The epochs whose files a reader of ``table`` sees (the empty epoch 0 included)."""
    if not table.is_dir():
        return []
    return sorted(int(m.group(1)) for p in table.iterdir() if (m := _EPOCH_FILE.match(p.name)))


@dataclass
class CommittedOnly:
    """Across a chain of kills of the pipeline whose root is the local directory
    ``storage``: :meth:`check` after each kill."""

    storage: str | Path
    #: Per sink, the highest epoch committed to it at any check so far.
    highest: dict[str, int] = field(default_factory=dict)
    #: How many tables the checks looked at (a check that saw none checked nothing).
    looked: int = 0

    def check(self) -> None:
        """Raise AssertionError if a table shows an epoch past every epoch committed
        to its sink so far."""
        root = str(self.storage)
        if not (Path(root) / DB_NAME).is_file():
            # Killed before the run created its metadata (the root directory itself is
            # made before Spark starts): nothing committed, and no sink written yet.
            return
        verdict = read_root(LocalFileSystem(), root)
        if verdict.damaged:
            raise AssertionError(f"{root}: metadata damaged after a kill: {verdict.damaged}")
        for name, sink in (verdict.sinks or {}).items():
            target = sink.target or {}
            if target.get("kind") != "parquet" or target.get("visibility", "committed") == "written":
                continue
            path = str(target["path"])
            table = Path(local_path(path) or path)
            last = sink.committed[1] if sink.committed is not None else 0
            high = self.highest[name] = max(self.highest.get(name, 0), last)
            past = [e for e in shown_epochs(table) if e > high]
            self.looked += 1
            if past:
                raise AssertionError(
                    f"sink {name!r}: {table} shows epochs {past}, past {high}, the last epoch committed to it so far"
                )
