"""ContinuousEventualCheckpoint (windows): the windows' control rows logged every
epoch and their state checkpointed eventually; restored from the last eventual
checkpoint, then caught up from the processor's own input log."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import ContinuousEventualCheckpoint


class ContinuousEventualBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.ContinuousEventualCheckpoint` runs (see the module)."""

    policy = ContinuousEventualCheckpoint
    held = Held.CEC_LOG
