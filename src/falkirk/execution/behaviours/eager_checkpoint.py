"""EagerCheckpoint: keyed state checkpointed after every epoch - and inside a loop
or a sequence-number region after every iteration or chunk - with its outputs
logged; restored from the chain."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import EagerCheckpoint


class EagerCheckpointBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.EagerCheckpoint` runs (see the module)."""

    policy = EagerCheckpoint
    held = Held.CHECKPOINTS
    checkpoints_each_part = True
