"""Handing a computed epoch to the engine's main thread: its input checked and, with
loops, what its worker computed (everything before the loops) committed
(:meth:`Admission.computed`).

The epoch loop does that for the oldest epoch in flight, in order. An interleaved
loop (:mod:`falkirk.execution.loop_stage`) does it earlier for the next epochs whose workers
are done, so that they enter the loop while an earlier epoch still iterates
(:meth:`Admission.admit`); the epoch loop then finds them handed over already
(:meth:`Admission.taken`). Either way the parts before the loops commit in epoch
order: admitted epochs are always the oldest epochs in flight after the one being
committed.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.commits import Committer
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochPhase, EpochWork

#: The epochs in flight after the one being committed, oldest first, with their workers.
InFlight = deque[tuple[EpochWork, Future[None]]]


class Admission:
    """Hands computed epochs over (see the module docstring); one per run."""

    def __init__(self, state: RunState, committer: Committer, loops: bool) -> None:
        self.state = state
        self.committer = committer
        #: The pipeline has loops or regions (the part before them commits first).
        self.loops = loops
        #: Epochs an interleaved loop took in whose epoch commit is still to come.
        self.admitted: set[int] = set()
        #: Epochs whose input check failed when a loop asked for them (the epoch
        #: loop checks them again, in order, and raises).
        self.refused: set[int] = set()

    def taken(self, work: EpochWork) -> bool:
        """Whether ``work`` was handed over already (an interleaved loop took it in);
        from now on the epoch loop has it."""
        if work.epoch in self.admitted:
            self.admitted.discard(work.epoch)
            return True
        return False

    def computed(self, work: EpochWork) -> None:
        """A worker has computed ``work``: check its input (raises if it changed while
        it was read) and, with loops, commit what it computed."""
        crash_point(CrashPoint.EPOCH_COMPUTED)
        self.state.ledger.check_input(work.epoch, work.ran)
        work.advance(EpochPhase.COMPUTED)
        if self.loops:
            self.committer.ahead(work)

    def admit(self, inflight: InFlight) -> list[EpochWork]:
        """The next epochs of ``inflight``, in order, whose workers are done without
        error and which no loop has taken in yet, each handed over now. A worker still
        running, one that failed, or an input check that fails ends the list (the
        epoch loop handles the failure in order)."""
        admitted: list[EpochWork] = []
        for later, future in inflight:
            if later.epoch in self.admitted:
                continue
            if later.epoch in self.refused or not future.done() or future.cancelled() or future.exception() is not None:
                break
            try:
                crash_point(CrashPoint.EPOCH_COMPUTED)
                self.state.ledger.check_input(later.epoch, later.ran)
            except Exception:  # raised again when the epoch loop reaches it, in order
                self.refused.add(later.epoch)
                break
            later.advance(EpochPhase.COMPUTED)
            self.committer.ahead(later)
            self.admitted.add(later.epoch)
            admitted.append(later)
        return admitted
