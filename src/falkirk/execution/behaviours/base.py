"""The protocol every policy's behaviour follows (see :mod:`falkirk.execution.behaviours`)."""

from __future__ import annotations

import logging
import time
from enum import Enum
from typing import ClassVar

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.run_state import RunState
from falkirk.graph import GraphError, Policy, Processor
from falkirk.operators import Step
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)


class Held(Enum):
    """What a storage root holds of a keyed processor's state, and so what a policy
    restarting it can restore from (the value says it in a message)."""

    #: Nothing: the state is rebuilt from epoch 1 (Stateless, LogOutputs, or no
    #: checkpoint committed yet).
    NOTHING = "nothing (the state is rebuilt from every input since epoch 1)"
    #: Checkpoints (LazyCheckpoint, EagerCheckpoint, AtBarriers).
    CHECKPOINTS = "checkpoints of the state"
    #: A log of every input since epoch 1 (FullHistory).
    INPUT_LOG = "a log of every input since epoch 1 (FullHistory's)"
    #: A log of the windows' control rows (ContinuousEventualCheckpoint).
    CEC_LOG = "a log of the windows' control rows (ContinuousEventualCheckpoint's)"


class PolicyBehaviour:
    """What a fault-tolerance policy does while a pipeline runs: what it persists
    and when, how a processor under it is restored, and what a restart can restore
    it from. Its declaration (:mod:`falkirk.graph.policies`, pure Python) says what
    it writes (``writes_checkpoints``, ``logs_outputs``, ``logs_inputs``) and which
    epochs it checkpoints (``checkpoints_at``); what Ξ it records follows from
    those and from ``rebuilds_from_inputs`` (:mod:`falkirk.control.xi`).

    One subclass per policy, registered in :data:`falkirk.execution.behaviours.BEHAVIOURS`.
    The defaults are those of a policy that checkpoints on its own schedule."""

    #: The policy declaration this behaviour runs.
    policy: ClassVar[type[Policy]] = Policy
    #: What a restart restores a processor's state from under this policy.
    held: ClassVar[Held] = Held.NOTHING
    #: Whether a keyed processor inside a loop or a sequence-number region
    #: checkpoints after every iteration or chunk (so that it can roll back to each).
    checkpoints_each_part: ClassVar[bool] = False

    def checkpoints_after(self, policy: Policy, epoch: int, so_far: int, *, barrier: bool) -> bool:
        """Whether a keyed processor's state is checkpointed after ``epoch`` (it has
        written ``so_far`` checkpoints; ``barrier``: the epoch is a global checkpoint's)."""
        return policy.checkpoints_at(epoch, so_far)

    def restore(self, state: RunState, p: Processor, at: Tick) -> None:
        """Give keyed processor ``p`` its state as of tick ``at``: from its committed
        checkpoint chain (each file checked first), then from its own input log for
        the epochs the chain lacks if its operator asks (a continuous eventual
        checkpoint); at the start tick, an empty state."""
        operator = state.operators[p.name]
        if at == Tick.start(state.topology.domains[p.name]):
            operator.reset()
            return
        chain = state.store.state_files(p.name)
        for _, _, files in chain:  # damaged or partial files are found before any use
            state.verified(files)
        operator.restore([(t.ordinal, kind, files) for t, kind, files in chain], at.ordinal)
        if operator.catch_up_from() is not None:  # an epoch processor (windows are never in loops)
            catch_up(state, p, at.epochs_done)


def catch_up(state: RunState, p: Processor, upto: int) -> None:
    """Replay p's own input log of the epochs its restored state still lacks
    (:meth:`~falkirk.operators.Operator.catch_up_from`), up to ``upto``."""
    operator = state.operators[p.name]
    start = operator.catch_up_from()
    if start is None or start >= upto:
        return
    logs = [state.store.logs(state.input_log(p, k)) for k in range(len(p.inputs))]
    schemas = [state.schemas[(i.src, i.port)] for i in p.inputs]
    crash_point(CrashPoint.CATCH_UP_STARTED)
    started, replayed = time.perf_counter(), 0
    for epoch in range(start + 1, upto + 1):
        missing = [k for k, log in enumerate(logs) if Tick(epoch) not in log]
        if missing:
            raise GraphError(
                f"recovery of {p.name!r} needs its input log of epoch {epoch} (inputs {missing}), which is gone: "
                "the metadata and the logs disagree; restart from a new storage root"
            )
        inputs = [state.read(log[Tick(epoch)], schema) for log, schema in zip(logs, schemas, strict=True)]
        operator.catch_up(Step(epoch, inputs))
        replayed += sum(f.size for log in logs for f in log[Tick(epoch)])
        crash_point(CrashPoint.CATCH_UP_EPOCH)
    state.report.caught_up.append((p.name, upto - start, replayed, time.perf_counter() - started))
    logger.info("recovery processor=%s caught up from its input log, epochs %d..%d", p.name, start + 1, upto)
