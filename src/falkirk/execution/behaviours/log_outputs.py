"""LogOutputs: logs what the processor sends (its Ξ names those logs); no state is persisted."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import LogOutputs


class LogOutputsBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.LogOutputs` runs (see the module)."""

    policy = LogOutputs
    held = Held.NOTHING
