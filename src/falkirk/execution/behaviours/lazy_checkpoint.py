"""LazyCheckpoint: keyed state checkpointed every ``every`` epochs (a delta, a full
snapshot every ``compact_every`` checkpoints); restored from the chain."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import LazyCheckpoint


class LazyCheckpointBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.LazyCheckpoint` runs (see the module)."""

    policy = LazyCheckpoint
    held = Held.CHECKPOINTS
