"""The extent of a continuous eventual checkpoint (CEC), kept by the driver.

A window operator under :class:`~falkirk.graph.ContinuousEventualCheckpoint` writes
a *footprint* of a window into its output log when the window opens (``G_open``) and
whenever it is checkpointed again (``G_check``). The eventual checkpoint at epoch c
is every window open at c at its last footprint t_i; T = min t_i. Recovery reads
the log from epoch T to c (the *extent*, q rows) and replays the input after T (u
rows). :class:`Extent` counts, per epoch, the open windows whose last footprint is
in that epoch, and the log and input rows of every epoch from T on - numbers only,
never a window - and chooses which footprint epochs to checkpoint again to meet the
targets Q and U within a budget (:meth:`Extent.checks`). A CEC log's chain entries
record T in their kind (:class:`falkirk.recovery.chain.Cec`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class Extent:
    """Footprint counts and per-epoch row counts of one CEC operator."""

    #: epoch -> open windows whose last footprint was written in that epoch
    footprints: dict[int, int] = field(default_factory=dict)
    #: epoch -> (rows written to the log, input rows) for the epochs from T on
    epochs: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def open(self) -> int:
        """N: the number of open windows."""
        return sum(self.footprints.values())

    def start(self, now: int) -> int:
        """T: the oldest footprint of an open window (``now`` when none is open)."""
        return min(self.footprints, default=now)

    def add(self, epoch: int, count: int) -> None:
        """``count`` windows got a footprint in ``epoch``."""
        if count:
            self.footprints[epoch] = self.footprints.get(epoch, 0) + count

    def remove(self, counts: Mapping[int, int]) -> None:
        """Windows whose footprints were in these epochs closed, merged or were
        checkpointed again: ``{footprint epoch: count}``. Raises ``ValueError`` if
        more are removed than were counted (the log and the count disagree)."""
        for epoch, count in counts.items():
            left = self.footprints.get(epoch, 0) - count
            if left < 0:
                raise ValueError(f"{count} windows with footprint epoch {epoch} removed, {self.footprints.get(epoch, 0)} counted")
            if left:
                self.footprints[epoch] = left
            else:
                self.footprints.pop(epoch, None)

    def record(self, epoch: int, log_rows: int, input_rows: int) -> None:
        """Epoch ``epoch`` wrote ``log_rows`` rows to the log and read ``input_rows``;
        epochs before T are forgotten (no recovery reads them)."""
        self.epochs[epoch] = (log_rows, input_rows)
        start = self.start(epoch)
        for e in [e for e in self.epochs if e < start]:
            del self.epochs[e]

    def extent_rows(self, now: int) -> int:
        """q: the log rows recovery at ``now`` reads (epochs T..now)."""
        return self._rows_from(self.start(now), now)[0]

    def replay_rows(self, now: int) -> int:
        """u: the input rows recovery at ``now`` replays (epochs after T)."""
        return self._rows_from(self.start(now) + 1, now)[1]

    def _rows_from(self, first: int, now: int) -> tuple[int, int]:
        rows = [v for e, v in self.epochs.items() if first <= e <= now]
        return sum(r for r, _ in rows), sum(i for _, i in rows)

    def checks(self, now: int, extent_target: int | None, replay_target: int | None, budget: int) -> int:
        """The cutoff: checkpoint again every open window whose footprint is older
        than it (0: none). Oldest footprint epochs first, whole epochs at a time,
        while q > ``extent_target`` or u > ``replay_target`` (as they would be after
        the checks), and at most ``budget`` windows - except that the oldest epoch is
        always taken when a target is exceeded, so that T advances however the
        windows are spread."""
        cutoff, checked = 0, 0
        for epoch in sorted(self.footprints):
            q, u = self._q_after(cutoff, checked, now), self._u_after(cutoff, now)
            if not _exceeds(q, extent_target) and not _exceeds(u, replay_target):
                break
            if checked and checked + self.footprints[epoch] > budget:
                break
            checked += self.footprints[epoch]
            cutoff = epoch + 1
        return cutoff

    def _start_after(self, cutoff: int, now: int) -> int:
        """T once the windows with footprints before ``cutoff`` are checkpointed now."""
        return min((e for e in self.footprints if e >= cutoff), default=now)

    def _q_after(self, cutoff: int, checked: int, now: int) -> int:
        return self._rows_from(self._start_after(cutoff, now), now)[0] + checked

    def _u_after(self, cutoff: int, now: int) -> int:
        return self._rows_from(self._start_after(cutoff, now) + 1, now)[1]

    @classmethod
    def rebuilt(cls, footprints: Iterable[tuple[int, int]], epochs: Iterable[tuple[int, int, int]]) -> Extent:
        """An extent from recovery: ``(footprint epoch, windows)`` of the eventual
        checkpoint and ``(epoch, log rows, input rows)`` of the epochs in the log."""
        extent = cls()
        for epoch, count in footprints:
            extent.add(epoch, count)
        for epoch, log_rows, input_rows in epochs:
            extent.epochs[epoch] = (log_rows, input_rows)
        return extent


def _exceeds(value: int, target: int | None) -> bool:
    return target is not None and value > target
