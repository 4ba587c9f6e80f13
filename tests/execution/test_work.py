"""An epoch's life is planned -> computed -> committed -> finished, or discarded
before its commit; any other transition is a bug in the engine and raises."""

from __future__ import annotations

import pytest

from falkirk.exceptions import InvariantError
from falkirk.execution.work import TRANSITIONS, EpochPhase, EpochWork


def work() -> EpochWork:
    return EpochWork(epoch=7, offsets={}, started=0.0)


def test_an_epoch_goes_through_its_life_in_order() -> None:
    w = work()
    assert w.phase is EpochPhase.PLANNED
    for phase in (EpochPhase.COMPUTED, EpochPhase.COMMITTED, EpochPhase.FINISHED):
        w.advance(phase)
        assert w.phase is phase


@pytest.mark.parametrize("after", [(), (EpochPhase.COMPUTED,)])
def test_an_epoch_may_be_discarded_before_its_commit(after: tuple[EpochPhase, ...]) -> None:
    w = work()
    for phase in after:
        w.advance(phase)
    w.advance(EpochPhase.DISCARDED)
    with pytest.raises(InvariantError, match="epoch 7 cannot go from discarded to computed"):
        w.advance(EpochPhase.COMPUTED)


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ((), EpochPhase.COMMITTED),  # committed before it is computed
        ((EpochPhase.COMPUTED,), EpochPhase.COMPUTED),  # computed twice
        ((EpochPhase.COMPUTED, EpochPhase.COMMITTED), EpochPhase.COMMITTED),  # committed twice
        ((EpochPhase.COMPUTED, EpochPhase.COMMITTED), EpochPhase.DISCARDED),  # a committed epoch is never discarded
    ],
)
def test_any_other_transition_raises(path: tuple[EpochPhase, ...], bad: EpochPhase) -> None:
    w = work()
    for phase in path:
        w.advance(phase)
    with pytest.raises(InvariantError, match=f"cannot go from {w.phase.value} to {bad.value}"):
        w.advance(bad)
    assert w.phase is (path[-1] if path else EpochPhase.PLANNED)


def test_every_phase_has_its_transitions() -> None:
    assert set(TRANSITIONS) == set(EpochPhase)
