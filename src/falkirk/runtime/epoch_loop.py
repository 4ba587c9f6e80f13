"""The epoch loop: plan, compute and commit epochs until the run's schedule says it
is done, handing every failure to the recovery coordinator.

Up to ``max_in_flight`` epochs are computed at once on the engine's pool; they
commit strictly in order on the run's own thread. What other threads may ask of a
running loop - stop (:meth:`Engine.stop <falkirk.runtime.Engine.stop>`, SIGINT,
SIGTERM) or fail a processor (:meth:`Engine.fail <falkirk.runtime.Engine.fail>`) -
is one shared, thread-safe :class:`RunControl`: a stop lets the epochs in flight
finish and plans no new one; a failure takes effect between epochs, once the epochs
in flight are committed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from falkirk.control.barriers import BarrierClock
from falkirk.control.faults import CrashPoint, armed_failures, crash_point
from falkirk.coordinator.coordinator import RecoveryCoordinator
from falkirk.execution.admission import Admission
from falkirk.execution.commits import Committer
from falkirk.execution.epoch import EpochRunner
from falkirk.execution.isolation import PoisonRows
from falkirk.execution.loop_stage import LoopStage
from falkirk.execution.report import RunReport
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.runtime.exceptions import EngineInvariantError
from falkirk.runtime.progress import EpochWatchers
from falkirk.runtime.stopping import StopRequest
from falkirk.spark.errors import as_storage_error, is_executor_loss
from falkirk.storage import StorageFullError


@dataclass(frozen=True)
class Schedule:
    """How long :meth:`Engine.run <falkirk.runtime.Engine.run>` runs (see its arguments)."""

    max_epochs: int | None
    idle_timeout: float
    poll_interval: float
    finish: bool


@dataclass(frozen=True)
class RunParts:
    """The parts of one run, built once its recovery is done."""

    state: RunState
    runner: EpochRunner
    committer: Committer
    loops: LoopStage
    admission: Admission


class FailRequests:
    """Processors asked to lose their in-memory state after the current epoch
    (:meth:`Engine.fail <falkirk.runtime.Engine.fail>`, or the fault point
    ``FALKIRK_FAIL_AT``), thread-safe: asked from any thread, taken by the loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def arm(self, names: set[str] | frozenset[str]) -> None:
        with self._lock:
            self._names |= names

    @property
    def armed(self) -> bool:
        with self._lock:
            return bool(self._names)

    def take(self) -> frozenset[str]:
        """The armed processors, cleared at once (a failure met while they roll back
        must not leave them armed)."""
        with self._lock:
            names, self._names = frozenset(self._names), set()
            return names


@dataclass
class RunControl:
    """What other threads ask of the running loop: stop it, fail processors."""

    stop: StopRequest = field(default_factory=StopRequest)
    failures: FailRequests = field(default_factory=FailRequests)


@dataclass
class EpochLoop:
    """One run's epoch loop (see the module docstring)."""

    parts: RunParts
    schedule: Schedule
    control: RunControl
    recovery: RecoveryCoordinator
    barriers: BarrierClock
    watchers: EpochWatchers
    report: RunReport
    max_in_flight: int
    #: Whether a failure rolls every processor back (the pipeline takes global checkpoints).
    global_rollback: bool
    #: Every processor's name (what a global rollback fails).
    processors: frozenset[str]
    #: The error a failure means when it says a file system is full, if it does.
    full_disk: Callable[[BaseException], StorageFullError | None]

    def run(self, pool: ThreadPoolExecutor) -> None:
        """Plan, compute and commit epochs until the schedule says the run is done."""
        run, schedule, stop, failures = (
            self.parts,
            self.schedule,
            self.control.stop,
            self.control.failures,
        )
        state, runner, max_epochs = run.state, run.runner, schedule.max_epochs
        epoch = min(state.frontier.values()) + 1
        planned = 0
        #: The last epoch planned: one discarded and run again (rows set aside, an
        #: executor lost) is still finished by a clean stop, as in flight when asked.
        highest = epoch - 1
        inflight: deque[tuple[EpochWork, Future[None]]] = deque()
        idle_since: float | None = None
        while True:
            if stop.abandoned:  # a second signal: the epochs in flight are not waited for
                raise stop.abandoning()
            while (
                len(inflight) < self.max_in_flight
                and not failures.armed
                and (
                    not stop.asked or epoch <= highest
                )  # a clean stop: the epochs in flight finish, no new one starts
                and (max_epochs is None or planned < max_epochs)
            ):
                offsets = state.ledger.plan(epoch, finish=schedule.finish)
                if offsets is None:
                    break
                work = runner.prepare(epoch, offsets, barrier=self.barriers.due(epoch))
                inflight.append((work, pool.submit(runner.compute, work)))
                highest = max(highest, epoch)
                epoch += 1
                planned += 1
            if not inflight:
                if not failures.armed:
                    run.committer.final_barrier()  # nothing new now: release what was read
                done = (
                    failures.armed
                    or stop.asked
                    or (max_epochs is not None and planned >= max_epochs)
                )
                now = time.monotonic()
                idle_since = now if idle_since is None else idle_since
                if done or now - idle_since >= schedule.idle_timeout:
                    return
                stop.pause(schedule.poll_interval)  # wait for input to arrive
                continue
            idle_since = None
            work, future = inflight.popleft()
            try:
                future.result()
            except (
                PoisonRows
            ) as found:  # rows its processor cannot process: set them aside, run again
                self._check_no_loop_inside(work, found)
                planned -= self.recovery.set_aside(state, runner, work, inflight, found)
                epoch = min(state.frontier.values()) + 1
                continue
            except Exception as exc:  # a full disk, a damaged file Spark read: say which
                failure = self.full_disk(exc) or as_storage_error(exc)
                if failure is not None:
                    raise failure from exc
                if not is_executor_loss(exc):
                    raise
                self._check_no_loop_inside(work, exc)
                injected = set(
                    failures.take()
                )  # cleared first: a loss in the rollback must not leave them armed
                planned -= self.recovery.executor_lost(state, runner, work, inflight, injected, exc)
                epoch = min(state.frontier.values()) + 1
                continue
            self.recovery.committed()
            self.report.in_flight = len(inflight) + 1
            self._commit(work, inflight)
            failures.arm(armed_failures(work.epoch))
            if failures.armed and not inflight:  # failures take effect between epochs
                failed = failures.take()
                if self.global_rollback:  # global checkpoints: a global rollback
                    failed = self.processors
                self.recovery.roll_back(state, runner, failed, work.epoch)
                epoch = min(state.frontier.values()) + 1

    def _check_no_loop_inside(self, work: EpochWork, cause: BaseException) -> None:
        """An epoch is discarded only while no loop holds later epochs."""
        admission, loops = self.parts.admission, self.parts.loops
        if admission.admitted or any(loops.flights.values()):
            raise EngineInvariantError(
                f"epochs {sorted(admission.admitted)} are inside an interleaved loop while epoch {work.epoch} is discarded"
            ) from cause

    def _commit(self, work: EpochWork, inflight: deque[tuple[EpochWork, Future[None]]]) -> None:
        """Commit one computed epoch (this thread, in epoch order), then collect garbage
        (:mod:`falkirk.execution.commits`). With loops, what a worker computed commits
        first, then the loops and what follows them run here
        (:mod:`falkirk.execution.loop_stage`) and commit the rest; an interleaved loop takes
        in the next epochs of ``inflight`` whose workers are done meanwhile
        (:mod:`falkirk.execution.admission`)."""
        run = self.parts
        if not run.admission.taken(work):
            run.admission.computed(work)
        if run.loops.active:
            run.loops.run(work, partial(run.admission.admit, inflight))
            for write in work.writes:
                write.result()
            crash_point(CrashPoint.LOOP_COMPUTED)
        run.committer.epoch(work)
        self.watchers.committed(work.epoch, time.perf_counter() - work.started, self.report)
