"""Fault-tolerance policies: what a processor persists, and so how it recovers.

Every policy produces the checkpoint metadata Ξ(p, f) of the Falkirk Wheel model,
so one solver finds a consistent rollback across any mixture of them.

========================  =================================  ===============================
policy                    persists per epoch                 recovers by
========================  =================================  ===============================
:class:`Stateless`        nothing                            re-executing from its inputs
:class:`LogOutputs`       its output messages (Parquet)      re-sending the log: a firewall
:class:`LazyCheckpoint`   changed keys every ``every``       latest checkpoint + replay of
                          epochs, full state every           the epochs after it
                          ``compact_every`` checkpoints
:class:`EagerCheckpoint`  changed keys and outputs, every    its checkpoint; downstream gets
                          epoch, before the epoch commits    the logged outputs
:class:`FullHistory`      every input it received            replaying its inputs from ∅
:class:`ContinuousEven-   control rows with the state of     the eventual checkpoint rebuilt
tualCheckpoint` (window   opened, chosen and closed windows  from its log, then its own input
operators only)           in its output log, and its input   log replayed from the oldest
                          since the oldest footprint         footprint T
========================  =================================  ===============================

A whole pipeline may instead take :class:`GlobalCheckpoints` (Wallaroo's and Flink's
aligned barrier snapshots): every keyed processor checkpoints at the same barrier
epochs (:class:`AtBarriers`), nothing else is persisted, and recovery rolls every
processor back to the last barrier every processor committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from falkirk.graph.exceptions import GraphError


@dataclass(frozen=True)
class Policy:
    """Base of all policies."""

    #: Whether the processor logs what it sends (D̄ = ∅ while the log lasts).
    logs_outputs: bool = False

    #: Copies of every block of the processor's state and of what it materialises,
    #: each on a different executor (a keyword: ``LazyCheckpoint(every=5,
    #: replicas=2)``). 2 makes the processor a Flux partition pair: losing one
    #: executor loses none of its blocks, so it never rolls back for that (the
    #: engine's ``replicas=2`` does this for every processor). Needs a cluster.
    replicas: int = field(default=1, kw_only=True)

    @property
    def name(self) -> str:
        return type(self).__name__

    #: Whether the policy ever writes keyed-state checkpoints.
    writes_checkpoints: bool = False

    #: Whether the processor logs every input it receives (as long as recovery may
    #: replay it).
    logs_inputs: bool = False

    #: Whether the processor's state is rebuilt by running it again over every
    #: input it logged, so that every epoch is a rollback point without a checkpoint.
    rebuilds_from_inputs: bool = False

    #: Whether the processor logs its state's changes every epoch and checkpoints the
    #: state only eventually (continuous eventual checkpoints; windows only).
    checkpoints_eventually: bool = False

    def checkpoints_at(self, epoch: int, checkpoints_so_far: int) -> bool:
        """Whether keyed state is checkpointed after ``epoch``."""
        return False

    def compacts(self, checkpoints_so_far: int) -> bool:
        """Whether the next checkpoint is a full snapshot rather than a delta."""
        return checkpoints_so_far == 0


@dataclass(frozen=True)
class Stateless(Policy):
    """Persist nothing; after a failure the processor re-executes from its inputs.

    For a stateful operator this means its state is rebuilt only by replaying
    every epoch from the start: use it for stateless transforms."""


@dataclass(frozen=True)
class LogOutputs(Policy):
    """Log every output message (Parquet per edge and epoch). Receivers that roll
    back are fed from the log, so this processor and everything upstream of it keep
    their state: like a checkpointed Spark RDD."""

    logs_outputs: bool = True


@dataclass(frozen=True)
class LazyCheckpoint(Policy):
    """Checkpoint keyed state every ``every`` epochs: only the keys changed since
    the previous checkpoint, with a full snapshot every ``compact_every``
    checkpoints. Recovery restores the latest usable checkpoint and replays the
    epochs after it."""

    every: int = 10
    compact_every: int = 10
    writes_checkpoints: bool = True

    def __post_init__(self) -> None:
        if self.every < 1 or self.compact_every < 1:
            raise GraphError(
                f"LazyCheckpoint(every={self.every}, compact_every={self.compact_every}): both "
                "must be >= 1"
            )

    def checkpoints_at(self, epoch: int, checkpoints_so_far: int) -> bool:
        return epoch % self.every == 0

    def compacts(self, checkpoints_so_far: int) -> bool:
        return checkpoints_so_far % self.compact_every == 0


@dataclass(frozen=True)
class EagerCheckpoint(Policy):
    """Checkpoint the changed keys and log the outputs of every epoch before the
    epoch is acknowledged: recovery never re-executes this processor's committed
    epochs and never needs its inputs again."""

    logs_outputs: bool = True
    writes_checkpoints: bool = True
    compact_every: int = 20

    def checkpoints_at(self, epoch: int, checkpoints_so_far: int) -> bool:
        return True

    def compacts(self, checkpoints_so_far: int) -> bool:
        return checkpoints_so_far % self.compact_every == 0


@dataclass(frozen=True)
class FullHistory(Policy):
    """Log every input the processor receives; recovery replays them through it from
    its initial state. Needs no checkpoint code, but the log grows without bound."""

    logs_inputs: bool = True
    rebuilds_from_inputs: bool = True


@dataclass(frozen=True)
class ContinuousEventualCheckpoint(Policy):
    """Continuous eventual checkpointing (the CEC paper) for window operators.

    Every epoch the operator appends to its persisted output log, with its results
    (``R`` rows: windows that closed), control rows carrying window state: ``G_open``
    for each window that opened, ``G_check`` for the open windows whose last
    footprint is oldest, and one epoch row with the watermark and N, the number of
    open windows. There is no checkpoint pause: the log is written with the output.
    The processor also keeps its input from T, the oldest footprint of an open
    window, on.

    Recovery rebuilds the eventual checkpoint - every open window at its last
    footprint t_i - from the log between T and the failed epoch, then replays the
    logged input after T, each window ignoring input of epochs up to its own t_i:
    the windows are exactly as before the failure, and nothing they emitted is
    emitted again.

    ``G_check`` rows move T forward: in every ``check_period``-th epoch, while the
    extent (log rows from T on, the paper's q) exceeds ``extent_target`` (Q) or the
    input recovery would replay (rows after T, u) exceeds ``replay_target`` (U),
    the windows with the oldest footprints are checkpointed, oldest first, at most
    ``check_budget`` of them (the paper's CI/CP budget, counted in rows: an epoch's
    control rows are written by the same job as its output). With neither target
    set only ``G_open`` rows are written: the least overhead, the longest recovery."""

    extent_target: int | None = None
    replay_target: int | None = None
    check_budget: int = 10_000
    check_period: int = 1
    logs_outputs: bool = True
    writes_checkpoints: bool = True
    logs_inputs: bool = True
    checkpoints_eventually: bool = True

    def __post_init__(self) -> None:
        for name in ("extent_target", "replay_target"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise GraphError(f"ContinuousEventualCheckpoint({name}={value}): must be >= 1 (or None: no target)")
        if self.check_budget < 1 or self.check_period < 1:
            raise GraphError(
                f"ContinuousEventualCheckpoint(check_budget={self.check_budget}, check_period={self.check_period}): "
                "both must be >= 1"
            )

    def checkpoints_at(self, epoch: int, checkpoints_so_far: int) -> bool:
        return True

    def compacts(self, checkpoints_so_far: int) -> bool:
        return False

    def checks_at(self, epoch: int) -> bool:
        """Whether ``epoch`` may write ``G_check`` rows."""
        return (self.extent_target is not None or self.replay_target is not None) and epoch % self.check_period == 0


@dataclass(frozen=True)
class AtBarriers(Policy):
    """The policy of a keyed processor in a pipeline with :class:`GlobalCheckpoints`:
    its state is checkpointed at the pipeline's barrier epochs, which the engine
    picks (never chosen per processor)."""

    writes_checkpoints: bool = True
    compact_every: int = 10

    def compacts(self, checkpoints_so_far: int) -> bool:
        return checkpoints_so_far % self.compact_every == 0


@dataclass(frozen=True)
class GlobalCheckpoints:
    """Pipeline-wide aligned barrier checkpoints (``Pipeline(name, checkpoints=...)``).

    A barrier follows every ``every``-th epoch, or the first epoch planned at least
    ``seconds`` after the previous barrier's. At a barrier every keyed processor
    snapshots its state (written in the background while later epochs run; a
    processor with several inputs has all of them up to the barrier and none after
    it), sinks have pre-committed, and the checkpoint commits as one metadata
    transaction holding Ξ of every processor at the barrier epoch - only once every
    snapshot is durable. Only then are sources acknowledged and sink output released.
    Between barriers nothing is persisted; recovery rolls every processor back to the
    last committed barrier and replays the input after it. A clean stop (and an idle
    service) takes a final barrier, so everything read is released."""

    every: int | None = None
    seconds: float | None = None
    compact_every: int = 10

    def __post_init__(self) -> None:
        if (self.every is None) == (self.seconds is None):
            raise GraphError("GlobalCheckpoints: give exactly one of every=EPOCHS or seconds=S")
        if self.every is not None and self.every < 1:
            raise GraphError(f"GlobalCheckpoints(every={self.every}): must be >= 1")
        if self.seconds is not None and self.seconds <= 0:
            raise GraphError(f"GlobalCheckpoints(seconds={self.seconds}): must be > 0")
        if self.compact_every < 1:
            raise GraphError(f"GlobalCheckpoints(compact_every={self.compact_every}): must be >= 1")
