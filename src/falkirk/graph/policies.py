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
========================  =================================  ===============================
"""

from __future__ import annotations

from dataclasses import dataclass

from falkirk.graph.exceptions import GraphError


@dataclass(frozen=True)
class Policy:
    """Base of all policies."""

    #: Whether the processor logs what it sends (D̄ = ∅ while the log lasts).
    logs_outputs: bool = False

    @property
    def name(self) -> str:
        return type(self).__name__

    #: Whether the policy ever writes keyed-state checkpoints.
    writes_checkpoints: bool = False

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
