"""Watching a system's committed output from outside the process.

Both systems commit one output unit per epoch: Falkirk an ``epoch-<n>.parquet`` file
(moved into place atomically), Structured Streaming's ``foreachBatch`` a
``batch=<n>/`` directory completed by its ``_SUCCESS`` marker. The watcher polls the
output directory and reports each unit once, with the time it was first seen and
its row count (from the Parquet footers, without reading data).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

_FALKIRK = re.compile(r"^epoch-(\d+)\.parquet$")
_SS = re.compile(r"^batch=(\d+)$")


@dataclass(frozen=True)
class Commit:
    index: int
    seen: float  # time.time() when first seen
    rows: int


class OutputWatcher:
    """Reports newly committed output units of ``system`` (falkirk or ss) in ``out``."""

    def __init__(self, system: str, out: Path) -> None:
        self.system = system
        self.out = out
        self.seen: dict[int, Commit] = {}

    def _units(self) -> dict[int, list[Path]]:
        found: dict[int, list[Path]] = {}
        if not self.out.exists():
            return found
        for entry in self.out.iterdir():
            if self.system == "falkirk":
                match = _FALKIRK.match(entry.name)
                if match:
                    found[int(match.group(1))] = [entry]
            else:
                match = _SS.match(entry.name)
                if match and (entry / "_SUCCESS").exists():
                    found[int(match.group(1))] = sorted(entry.glob("part-*.parquet"))
        return found

    def poll(self) -> list[Commit]:
        """Units committed since the last poll (each reported once)."""
        now = time.time()
        fresh = []
        for index, files in sorted(self._units().items()):
            if index in self.seen:
                continue
            try:
                rows = sum(pq.read_metadata(f).num_rows for f in files)
            except (OSError, ValueError):  # a file replaced under us: count it next time
                continue
            commit = Commit(index, now, rows)
            self.seen[index] = commit
            fresh.append(commit)
        return fresh

    def last_index(self) -> int:
        return max(self.seen, default=-1)
