"""Stateless: persists nothing; a keyed processor under it is rebuilt from epoch 1."""

from __future__ import annotations

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.graph import Stateless


class StatelessBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.Stateless` runs (see the module)."""

    policy = Stateless
    held = Held.NOTHING
