"""Policies' behaviour: one module per fault-tolerance policy.

A policy is declared in :mod:`falkirk.graph.policies` (pure Python: what it writes
and when) and run by its behaviour here (:class:`PolicyBehaviour`: when a keyed
processor checkpoints, whether it checkpoints every part of an epoch inside a loop
or a region, how it is restored, what a restart restores it from). Adding a policy
is its declaration, one behaviour module, and its entry in :data:`BEHAVIOURS`.
"""

from __future__ import annotations

from falkirk.execution.behaviours.at_barriers import AtBarriersBehaviour
from falkirk.execution.behaviours.base import Held, PolicyBehaviour, catch_up
from falkirk.execution.behaviours.continuous_eventual import ContinuousEventualBehaviour
from falkirk.execution.behaviours.eager_checkpoint import EagerCheckpointBehaviour
from falkirk.execution.behaviours.full_history import FullHistoryBehaviour
from falkirk.execution.behaviours.lazy_checkpoint import LazyCheckpointBehaviour
from falkirk.execution.behaviours.log_outputs import LogOutputsBehaviour
from falkirk.execution.behaviours.stateless import StatelessBehaviour
from falkirk.graph import GraphError, Policy

#: Every policy's behaviour, by the policy it runs.
BEHAVIOURS: tuple[PolicyBehaviour, ...] = (
    StatelessBehaviour(),
    LogOutputsBehaviour(),
    LazyCheckpointBehaviour(),
    EagerCheckpointBehaviour(),
    AtBarriersBehaviour(),
    FullHistoryBehaviour(),
    ContinuousEventualBehaviour(),
)
_BY_POLICY = {b.policy: b for b in BEHAVIOURS}


def behaviour_of(policy: Policy) -> PolicyBehaviour:
    """The behaviour that runs ``policy`` (a subclass of a registered policy runs as it)."""
    for kind in type(policy).__mro__:
        if kind in _BY_POLICY:
            return _BY_POLICY[kind]
    raise GraphError(
        f"policy {type(policy).__name__} has no behaviour: a policy is declared in falkirk.graph.policies and run by "
        "a PolicyBehaviour registered in falkirk.execution.behaviours.BEHAVIOURS"
    )


__all__ = ["BEHAVIOURS", "Held", "PolicyBehaviour", "behaviour_of", "catch_up"]
