"""Every policy declared in falkirk.graph has exactly one registered behaviour, and
the behaviours decide what the engine used to decide by isinstance chains: when a
keyed processor checkpoints, whether it checkpoints every part of an epoch, and what
a restart restores it from."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import pytest

from falkirk import graph
from falkirk.execution.behaviours import BEHAVIOURS, Held, behaviour_of
from falkirk.graph import (
    AtBarriers,
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    FullHistory,
    GraphError,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)

DECLARED = {c for _, c in inspect.getmembers(graph.policies, inspect.isclass) if issubclass(c, Policy) and c is not Policy}


def test_every_declared_policy_has_one_behaviour() -> None:
    assert sorted(b.policy.__name__ for b in BEHAVIOURS) == sorted(c.__name__ for c in DECLARED)


@pytest.mark.parametrize(
    ("policy", "held", "each_part"),
    [
        (Stateless(), Held.NOTHING, False),
        (LogOutputs(), Held.NOTHING, False),
        (LazyCheckpoint(every=3), Held.CHECKPOINTS, False),
        (EagerCheckpoint(), Held.CHECKPOINTS, True),
        (AtBarriers(), Held.CHECKPOINTS, False),
        (FullHistory(), Held.INPUT_LOG, False),
        (ContinuousEventualCheckpoint(), Held.CEC_LOG, False),
    ],
)
def test_what_a_policy_restores_from_and_persists_per_part(policy: Policy, held: Held, each_part: bool) -> None:
    behaviour = behaviour_of(policy)
    assert behaviour.held is held
    assert behaviour.checkpoints_each_part is each_part


def test_global_checkpoints_checkpoint_at_barriers_only() -> None:
    at = behaviour_of(AtBarriers())
    assert [at.checkpoints_after(AtBarriers(), e, 0, barrier=e % 3 == 0) for e in range(1, 7)] == [False, False, True, False, False, True]


def test_a_lazy_checkpoint_follows_its_schedule_whatever_the_barriers() -> None:
    lazy, policy = behaviour_of(LazyCheckpoint(every=2)), LazyCheckpoint(every=2)
    assert [lazy.checkpoints_after(policy, e, 0, barrier=True) for e in range(1, 5)] == [policy.checkpoints_at(e, 0) for e in range(1, 5)]
    assert [lazy.checkpoints_after(policy, e, 0, barrier=False) for e in range(1, 5)] == [False, True, False, True]


def test_a_subclass_of_a_policy_runs_as_it_and_an_unregistered_policy_is_refused() -> None:
    @dataclass(frozen=True)
    class Slower(LazyCheckpoint):
        pass

    @dataclass(frozen=True)
    class Unknown(Policy):
        pass

    assert behaviour_of(Slower()) is behaviour_of(LazyCheckpoint())
    with pytest.raises(GraphError, match=r"Unknown has no behaviour.*BEHAVIOURS"):
        behaviour_of(Unknown())
