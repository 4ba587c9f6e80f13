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
        self._planned_at = 0.0

    def start(self, epoch: int) -> None:
        """Every processor stands at ``epoch``, the last barrier (after any recovery)."""
        self.last = epoch
        self._planned_at = time.monotonic()

    def due(self, epoch: int) -> bool:
        """Whether a barrier follows ``epoch`` (planned now)."""
        if self.checkpoints is None:
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
