"""AtBarriers (global checkpoints): keyed state checkpointed at the pipeline's
barrier epochs, which the engine picks; restored from the chain."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import AtBarriers, Policy


class AtBarriersBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.AtBarriers` runs (see the module)."""

    policy = AtBarriers
    held = Held.CHECKPOINTS

    def checkpoints_after(self, policy: Policy, epoch: int, so_far: int, *, barrier: bool) -> bool:
        return barrier
