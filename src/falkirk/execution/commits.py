"""Committing computed work, in epoch order, on the engine's main thread: steps 4
and 5 of an epoch (:mod:`falkirk.runtime.engine`).

A commit is one metadata transaction (:meth:`Ledger.commit
<falkirk.control.ledger.Ledger.commit>`); after it the files of the records it
forgot are deleted (crash point ``gc.before``) and the edges act on what it made
durable (releases to sinks, acknowledgements to sources:
:class:`~falkirk.execution.edges.EdgeActions`). Three kinds of commit share that:

* an epoch's (:meth:`Committer.epoch`), after everything it computed;
* a part of an epoch (:meth:`Committer.part`): a loop's iteration or a
  sequence-number region's chunk, between ``<unit>.written`` and ``<unit>.committed``;
  with loops, what the workers computed ahead of the loops commits first
  (:meth:`Committer.ahead`);
* a final global checkpoint (:meth:`Committer.final_barrier`), so that an idle
  service or a clean stop has everything it read checkpointed and released.
"""

from __future__ import annotations

import logging
import time
from enum import Enum

from falkirk.control.barriers import BarrierClock
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.edges import EdgeActions
from falkirk.execution.epoch import EpochRunner
from falkirk.execution.observer import Observer
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochPhase, EpochWork
from falkirk.storage import CommitBatch, StoredFile
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)

#: Seconds a counting run waits, after an epoch's commit, for Spark to report the
#: rows its sources read (usually there already: see EpochCounts).
_COUNT_WAIT = 0.25


class Part(Enum):
    """A part of an epoch committed on its own, with the crash points around its commit."""

    ITERATION = (CrashPoint.ITERATION_WRITTEN, CrashPoint.ITERATION_COMMITTED)
    CHUNK = (CrashPoint.CHUNK_WRITTEN, CrashPoint.CHUNK_COMMITTED)


class Committer:
    """Commits one run's work (see the module docstring)."""

    def __init__(self, state: RunState, runner: EpochRunner, edges: EdgeActions, barriers: BarrierClock, observer: Observer) -> None:
        self.state = state
        self.runner = runner
        self.edges = edges
        self.barriers = barriers
        self.observer = observer

    def collect(self, files: list[StoredFile]) -> None:
        """Delete garbage whose records a durable commit forgot."""
        if files:
            crash_point(CrashPoint.GC_BEFORE)  # their records are forgotten durably; files still there
            self.state.delete(files)
            self.observer.collected(files)

    def part(self, part: Part, work: EpochWork, ticks: dict[str, Tick]) -> None:
        """Commit one part of an epoch - a loop's iteration or a sequence-number
        region's chunk: what its processors persisted at their ``ticks`` and
        their Ξ there (see :mod:`falkirk.execution.loop_stage`, :mod:`falkirk.execution.sequence_stage`),
        between the part's crash points (``<unit>.written`` and ``<unit>.committed``)."""
        written, committed = part.value
        crash_point(written)
        self.collect(self.state.ledger.commit(work.epoch, work.batch, ticks, complete=False, ticks=ticks))
        self.state.quarantine.committed_now(work.batch.quarantine)
        crash_point(committed)
        self.edges.act()

    def ahead(self, work: EpochWork) -> None:
        """With loops: commit what the workers computed of ``work``'s epoch (every
        processor before the loops), which then stand at the epoch, and empty
        ``work`` for the loops' stage."""
        self.collect(self.state.ledger.commit(work.epoch, work.batch, work.ran, complete=False))
        self.state.quarantine.committed_now(work.batch.quarantine)
        for name in work.ran:  # (before the edges act: a sink publishes up to its frontier)
            self.state.frontier[name] = work.epoch
        self.edges.act()
        work.batch, work.ran = CommitBatch(), []

    def epoch(self, work: EpochWork) -> None:
        """Commit the (rest of the) epoch ``work`` computed, collect the garbage the
        commit let go, act on the edges, and count the epoch in the run's report."""
        state, epoch = self.state, work.epoch
        garbage = state.ledger.commit(epoch, work.batch, work.ran, barrier=work.barrier)
        work.advance(EpochPhase.COMMITTED)
        state.quarantine.committed_now(work.batch.quarantine)
        self.collect(garbage)
        if work.barrier:
            self.barriers.last = epoch
        for name in work.ran:  # (before the edges act: a sink publishes up to its frontier)
            state.frontier[name] = epoch
        self.edges.act()
        self.runner.finish(work)
        report = state.report
        report.epochs.append(epoch)
        report.epoch_seconds.append(time.perf_counter() - work.started)
        for name, seconds in work.times.seconds.items():
            report.step_seconds.setdefault(name, []).append(seconds)
            report.step_finished.setdefault(name, []).append(work.times.finished[name])
        if state.counting:
            # Spark reports an epoch's input counts on its listener thread once the jobs
            # that read it end (before the commit): a short wait covers the lag.
            if not work.counts.wait_for_input(_COUNT_WAIT):
                logger.debug("epoch %d: Spark had not reported every source's rows at its commit", epoch)
            report.last_records = work.counts.records
            report.records = (report.records or 0) + report.last_records
        self.observer.committed(state, work)
        work.advance(EpochPhase.FINISHED)

    def final_barrier(self) -> None:
        """With global checkpoints and nothing in flight: a barrier after the last
        committed epoch unless one follows it already, so that everything read is
        checkpointed, acknowledged and released (a clean stop, an idle service)."""
        state = self.state
        last = max(state.frontier.values(), default=0)
        if not self.barriers.final_due(last):
            return
        work = self.runner.snapshot(last)
        self.collect(state.ledger.commit(last, work.batch, work.ran, barrier=True))
        self.edges.act()
        state.report.checkpoints.append(("*", last, "global"))
