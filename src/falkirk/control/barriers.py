"""When a global checkpoint's barrier falls (``Pipeline(checkpoints=GlobalCheckpoints(...))``).

The engine asks :meth:`BarrierClock.due` as it plans each epoch; the clock remembers
the last barrier that committed and when the last one was planned.
"""

from __future__ import annotations

import time

from falkirk.graph import GlobalCheckpoints


class BarrierClock:
    """The barrier schedule of ``checkpoints`` (None: no global checkpoints)."""

    def __init__(self, checkpoints: GlobalCheckpoints | None) -> None:
        self.checkpoints = checkpoints
        #: The epoch of the last committed barrier.
        self.last = 0
        #: Epochs up to this one are replayed by some processors only (those that
        #: stood before it after a recovery): no barrier can fall there.
        self.partial_until = 0
        self._planned_at = 0.0

    def start(self, epoch: int, ahead: int | None = None) -> None:
        """After a recovery: every processor stands at ``epoch`` or later, the last
        barrier; ``ahead``: where the furthest one stands (a root whose processors
        checkpointed each on its own, then moved to global checkpoints), so the epochs
        up to it run only the processors behind, and the first barrier follows it."""
        self.last = epoch
        self.partial_until = epoch if ahead is None else max(epoch, ahead)
        self._planned_at = time.monotonic()

    def due(self, epoch: int) -> bool:
        """Whether a barrier follows ``epoch`` (planned now)."""
        if self.checkpoints is None or epoch <= self.partial_until:
            return False
        if self.checkpoints.every is not None:
            due = epoch % self.checkpoints.every == 0
        else:
            due = time.monotonic() - self._planned_at >= float(self.checkpoints.seconds or 0)
        if due:
            self._planned_at = time.monotonic()
        return due

    def final_due(self, last_committed: int) -> bool:
        """Whether a stop or an idle pause needs a barrier after ``last_committed``
        (none follows it yet); if so it is counted as taken."""
        if self.checkpoints is None or last_committed <= self.last:
            return False
        self.last = last_committed
        return True

    def rolled_back(self, epoch: int) -> None:
        """A rollback took every processor back to ``epoch`` or later."""
        self.last = min(self.last, epoch)
