"""The recovery coordinator: the one owner of every way a run returns to a consistent state.

The engine runs epochs; whenever something fails it hands over to the coordinator,
which decides what rolls back and does it, the way Flink's CheckpointCoordinator
owns its checkpoints. The five paths:

1. **Restart** (:meth:`RecoveryCoordinator.restart`): a run starts on a root with
   committed work. Every processor has failed; the solver picks each one's frontier
   from the committed Ξ records, committed work above it is undone, keyed state is
   restored from its checkpoints (each file checked first), and the work of crashed
   attempts is swept.
2. **Partial failure** (:meth:`RecoveryCoordinator.roll_back`): some processors lost
   their in-memory state (``Engine.fail``, ``FALKIRK_FAIL_AT``) between epochs; the
   survivors offer their live state (⊤), so only what the constraints require goes back.
3. **Executor loss** (:meth:`RecoveryCoordinator.executor_lost`): an executor died
   while epochs were in flight; they are discarded, the processors whose state lost a
   block (or that cannot take back a discarded step) fail, and path 2 follows.
4. **In-process restart** (:meth:`RecoveryCoordinator.restart_in_process`): an
   executor was lost outside an epoch's computation (a commit, a loop's stage, a
   recovery); the run ends and the engine runs again in this driver, recovering by
   path 1 without a JVM start.

5. **Rows set aside** (:meth:`RecoveryCoordinator.set_aside`): an epoch failed on
   rows a processor cannot process, now found (:mod:`falkirk.execution.isolation`);
   they are set aside for the epoch, and the epochs in flight are discarded and run
   again as in path 3.

Paths 3 and 4 give up (raising the last error) after :data:`~.losses.MAX_LOSSES`
attempts in a row with no epoch committed between them.
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import Future

from falkirk.control import garbage
from falkirk.control.barriers import BarrierClock
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.coordinator import rollback
from falkirk.coordinator.losses import give_up_after, prepare_rollback
from falkirk.execution.epoch import EpochRunner
from falkirk.execution.isolation import ErrorLimitExceeded, NonDeterministicRowsError, PoisonRows
from falkirk.execution.observer import Observer
from falkirk.execution.report import RunReport
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.spark.errors import as_storage_error, first_line, is_executor_loss
from falkirk.storage.full import no_space

logger = logging.getLogger(__name__)


#: Searches of one processor's rows of one epoch before the run stops: every bad row
#: is found by the first; a second may follow a row whose error another one hid.
MAX_SEARCHES = 2


class RecoveryCoordinator:
    """Owns recovery for one engine, across its runs: it counts the losses recovered
    since the last commit (to give up on an error that only looks like a lost
    executor) and tells the observer, the report and the barrier clock what it did."""

    def __init__(self, report: RunReport, observer: Observer, barriers: BarrierClock) -> None:
        self.report = report
        self.observer = observer
        self.barriers = barriers
        #: Executor losses recovered in this driver since the last commit (path 3).
        self.losses = 0
        #: Runs ended by a lost executor with no epoch committed since (path 4).
        self.restarts = 0

    def restart(self, state: RunState) -> None:
        """Path 1: bring a run that just took its root to the last consistent state
        the committed metadata allows (nothing committed: abort whatever a sink
        pre-committed, it is in doubt), sweep the files of crashed attempts and
        start the monitor. No epoch is in flight."""
        stored = state.store.checkpoints(state.topology)
        state.frontier = {p: 0 for p in state.pipeline.processors}
        if any(stored.values()):
            rollback.recover(state, {p: [s.meta for s in ss] for p, ss in stored.items()})
            self.observer.recovered(state, "restart")
        else:
            for p in state.pipeline.processors.values():
                if p.spec.sink:
                    state.operators[p.name].abort_output(0)
        garbage.sweep(state.fs, state.root, state.store)  # work of crashed attempts
        state.ledger.start_monitor()
        rollback.settle(state)

    def roll_back(self, state: RunState, runner: EpochRunner, failed: frozenset[str], last: int) -> None:
        """Path 2: roll back after in-process failures of ``failed`` after epoch
        ``last`` (nothing in flight), and count each processor's checkpoints again
        from what stays committed (a base must follow a rollback past every base)."""
        rollback.recover_partial(state, failed, last)
        runner.checkpoints = {p.name: len(state.store.state_files(p.name)) for p in state.keyed}
        self.observer.failed(failed, last)
        self.observer.recovered(state, "rollback")
        self.barriers.rolled_back(min(state.frontier.values()))

    def executor_lost(
        self,
        state: RunState,
        runner: EpochRunner,
        work: EpochWork,
        inflight: deque[tuple[EpochWork, Future[None]]],
        injected: set[str],
        exc: BaseException,
    ) -> int:
        """Path 3: an executor died while ``work``'s epoch ran. The epochs in flight
        are discarded, the processors that lost state (with ``injected``, the
        failures injected already) fail, and they roll back by path 2. Returns how
        many epochs were discarded."""
        self.losses += 1
        give_up_after(self.losses, work.epoch, exc)
        failed, last, discarded = prepare_rollback(state, state.spark, work, inflight, injected, exc)
        self.roll_back(state, runner, failed, last)
        self.report.executor_losses.append(work.epoch)
        return discarded

    def set_aside(
        self,
        state: RunState,
        runner: EpochRunner,
        work: EpochWork,
        inflight: deque[tuple[EpochWork, Future[None]]],
        found: PoisonRows,
    ) -> int:
        """Path 5: ``work``'s epoch failed on rows its processor cannot process, now
        found (:mod:`falkirk.execution.isolation`). They are set aside for the epoch
        (committed with it), and, as after an executor loss, the epochs in flight are
        discarded and what moved into them is taken back (path 3), so that they run
        again without those rows. Returns how many epochs were discarded."""
        record = found.record
        known = state.quarantine.get(record.processor, record.epoch)
        repeated = known is not None and set(record.reasons) <= set(known.reasons)
        if repeated or state.quarantine.searched(record.processor, record.epoch) > MAX_SEARCHES:
            raise NonDeterministicRowsError(
                f"processor {record.processor!r} failed again on epoch {record.epoch}'s rows after they were set aside "
                f"({next(iter(record.reasons.values()))}): the rows it fails on are not the same each time - its input "
                "changes from one read to the next (current_timestamp(), rand() or uuid() above it) or its function fails "
                "at random. Make them deterministic, or use on_error='stop'"
            )
        merged = state.quarantine.add(record)
        if not state.pipeline.error_limit.allows(len(merged.reasons), found.read):
            raise ErrorLimitExceeded(
                f"processor {record.processor!r} cannot process {len(merged.reasons)} {record.unit.value}s of epoch "
                f"{record.epoch}'s {found.read} rows (first: {next(iter(merged.reasons.values()))}): more than "
                f"{state.pipeline.error_limit} allows, which looks like a systematic error, not a few bad rows. Fix the "
                "function or the input, or allow more with Pipeline(error_limit=ErrorLimit(...)); then run again"
            )
        crash_point(CrashPoint.QUARANTINE_FOUND)
        why = f"processor {record.processor!r} set aside {len(record.reasons)} {record.unit.value}(s) of epoch {record.epoch}"
        later = list(inflight)
        failed, last, discarded = prepare_rollback(state, state.spark, work, inflight, set(), found, why=why)
        for _, future in later:  # rows a later epoch found meanwhile are set aside too: no second search
            error = future.exception()
            if isinstance(error, PoisonRows) and state.pipeline.error_limit.allows(len(error.record.reasons), error.read):
                state.quarantine.add(error.record)
                self.report.set_aside.append((error.record.processor, error.record.epoch, len(error.record.reasons)))
        self.roll_back(state, runner, failed, last)
        self.report.set_aside.append((record.processor, record.epoch, len(record.reasons)))
        return discarded

    def new_run(self) -> None:
        """A call of :meth:`Engine.run` begins: in-process restarts are counted per run."""
        self.restarts = 0

    def committed(self) -> None:
        """An epoch committed: the losses counted so far were recovered."""
        self.losses = 0

    def restart_in_process(self, exc: Exception, committed: int, max_epochs: int | None) -> int | None:
        """Path 4: a run ended with ``exc`` after committing ``committed`` epochs.
        If a lost executor ended it (outside an epoch's computation), say so and
        return how many epochs the next run may still run (``max_epochs`` less what
        committed; None: no limit): the engine runs again in this driver and
        recovers by path 1. Any other error (or too many losses in a row) is raised."""
        if not is_executor_loss(exc) or as_storage_error(exc) is not None or no_space(exc) is not None:
            raise exc  # a run again would fail the same way
        self.restarts = 1 if committed else self.restarts + 1
        give_up_after(self.restarts, self.report.epochs[-1] + 1 if self.report.epochs else 1, exc)
        logger.warning(
            "an executor was lost outside an epoch's computation; recovering in this driver from the "
            "committed metadata, as a restart would (%s)",
            first_line(exc),
        )
        self.report.restarts_in_process += 1
        return None if max_epochs is None else max(0, max_epochs - committed)
