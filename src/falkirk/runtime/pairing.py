"""The engine's side of a driver pair: the shared store (:mod:`falkirk.storage.pairs`)
with crash points at the egress's two moments, for the crash tests.

``pair.claimed`` (this driver claimed an epoch of a sink and writes it; nothing
written yet) and ``pair.written`` (the epoch is written, the other driver not yet
told: a death here leaves an unfinished claim the other driver takes over and writes
again, replacing the file with the same rows).
"""

from __future__ import annotations

from falkirk.runtime.faults import crash_point
from falkirk.storage import StoredFile
from falkirk.storage.pairs import PairStore


class Pair(PairStore):
    """A :class:`PairStore` whose egress passes the pair's crash points."""

    def claim(self, sink: str, epoch: int) -> list[StoredFile] | None:
        theirs = super().claim(sink, epoch)
        if theirs is None:
            crash_point("pair.claimed")
        return theirs

    def written(self, sink: str, epoch: int, files: list[StoredFile]) -> None:
        crash_point("pair.written")
        super().written(sink, epoch, files)
