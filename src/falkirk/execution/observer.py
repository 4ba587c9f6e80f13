"""What the engine tells its telemetry (the dashboard's figures) as a run goes on.

One place for every hand-over from the epoch loop to :class:`Telemetry`, so the
engine's control flow has no telemetry branches. Without a dashboard
(``Engine(ui=None)``) every method does nothing and costs nothing.
"""

from __future__ import annotations

import time

from falkirk.control.domains import tick
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.graph import Pipeline
from falkirk.observe.telemetry import Telemetry
from falkirk.storage import StoredFile

#: Committed epochs whose counts Spark never reported are forgotten past this many.
_PENDING = 50


def telemetry_for(pipeline: Pipeline) -> Telemetry:
    """Empty telemetry of ``pipeline``'s processors, edges and sinks."""
    return Telemetry(
        pipeline.name,
        {p.name: (p.kind, p.policy.name) for p in pipeline.processors.values()},
        [(i.src, q.name) for _, i, q, _ in pipeline.edges()],
        sinks=[p.name for p in pipeline.processors.values() if p.spec.sink],
    )


class Observer:
    """Hands a run's progress to ``telemetry`` (None: a no-op)."""

    def __init__(self, pipeline: Pipeline, telemetry: Telemetry | None) -> None:
        self.pipeline = pipeline
        self.telemetry = telemetry
        #: Committed epochs whose row counts Spark has not reported yet.
        self._counting: list[EpochWork] = []

    def started(self, state: RunState) -> None:
        """The run stands at the root's last commit (after any recovery)."""
        self._counting = []
        if self.telemetry is not None:
            self.telemetry.restored(state.store.committed_epoch() or 0)
            self._frontiers(state)

    def recovered(self, state: RunState, kind: str) -> None:
        """A recovery (``"restart"`` or ``"rollback"``) just ended; its time is the
        report's last ``recovery_seconds``."""
        if self.telemetry is not None:
            report = state.report
            self.telemetry.recovered(report.recovery_seconds[-1], kind, dict(state.frontier), dict(report.recovery_reasons))

    def failed(self, processors: frozenset[str], epoch: int) -> None:
        if self.telemetry is not None:
            self.telemetry.failed(sorted(processors), epoch)

    def committed(self, state: RunState, work: EpochWork) -> None:
        """``work``'s epoch committed: its time, the frontiers, the counts so far."""
        if self.telemetry is None:
            return
        work.seconds = time.perf_counter() - work.started
        self.telemetry.committed(work.epoch, work.seconds, work.ran)
        for record in work.batch.quarantine:
            self.telemetry.set_aside(record.processor, record.epoch, record.rows)
        self._frontiers(state)
        self._counting.append(work)
        self.count()

    def collected(self, files: list[StoredFile]) -> None:
        if self.telemetry is not None and files:
            self.telemetry.collected(len(files), sum(f.size for f in files))

    def released(self, sink: str, upto: int) -> None:
        if self.telemetry is not None:
            self.telemetry.released(sink, upto)

    def count(self, wait: float = 0.0) -> None:
        """Hand over the row counts Spark has reported since the last call (waiting up
        to ``wait`` seconds for late ones: the end of a run)."""
        if self.telemetry is None:
            return
        deadline = time.monotonic() + wait
        while True:
            for work in list(self._counting):
                rows = work.counts.new_rows(self.pipeline)
                if rows:
                    self.telemetry.counted(work.epoch, work.seconds, rows)
                if not work.counts.waiting:
                    self._counting.remove(work)
            del self._counting[: max(0, len(self._counting) - _PENDING)]
            if not self._counting or time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def _frontiers(self, state: RunState) -> None:
        """Every processor's last epoch, latest rollback point and low-watermark."""
        assert self.telemetry is not None
        monitor = state.ledger.monitor
        last = max(state.frontier.values(), default=0)
        points = {
            p: max((tick(m.frontier).epochs_done for m in monitor.available(p) if not m.frontier.is_top), default=0)
            for p in state.frontier
        }
        marks = {p: last if f.is_top else tick(f).epochs_done for p, f in monitor.low_watermarks.items()}
        self.telemetry.frontiers(dict(state.frontier), points, marks)
