"""The driver's book-keeping of a CEC extent (falkirk.recovery.extent): examples and
hypothesis properties against a model that keeps every window's footprint."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.recovery.extent import Extent


def test_start_counts_and_removal() -> None:
    ext = Extent()
    ext.add(1, 3)
    ext.add(2, 2)
    ext.record(1, 4, 10)
    ext.record(2, 3, 20)
    assert ext.open == 5 and ext.start(3) == 1
    assert ext.extent_rows(2) == 7 and ext.replay_rows(2) == 20  # T=1: log of 1..2, input of 2
    ext.remove({1: 3})
    assert ext.start(3) == 2 and ext.open == 2
    with pytest.raises(ValueError, match="removed"):
        ext.remove({2: 3})


def test_checks_take_the_oldest_epochs_until_the_targets_hold() -> None:
    ext = Extent()
    for e in range(1, 6):
        ext.add(e, 2)
        ext.record(e, 3, 100)
    # u = input after T=1 = 400 rows; a target of 250 needs T >= 3 (input of 4, 5 = 200)
    cutoff = ext.checks(6, None, 250, budget=100)
    assert cutoff == 3
    # a budget of 3 windows allows one epoch's 2 windows only
    assert ext.checks(6, None, 250, budget=3) == 2
    # the oldest epoch is taken even if it alone exceeds the budget
    assert ext.checks(6, None, 250, budget=1) == 2
    assert ext.checks(6, None, None, budget=100) == 0


ops = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(0, 50)),  # windows opened, closed, input rows per epoch
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(1, 200), st.integers(1, 10))
def test_extent_agrees_with_a_model_of_every_window(epochs: list[tuple[int, int, int]], target: int, budget: int) -> None:
    """Whatever opens, closes and is checked: the counts equal the model's, T is the
    oldest open footprint and never goes back, and checks respect the budget
    (but for the oldest epoch)."""
    ext = Extent()
    model: dict[int, int] = {}  # window id -> footprint epoch
    next_id = 0
    last_start = 0
    for epoch, (opened, closed, rows) in enumerate(epochs, 1):
        cutoff = ext.checks(epoch, None, target, budget)
        checked = [w for w, fp in model.items() if fp < cutoff]
        oldest = Counter(fp for fp in model.values() if fp == min(model.values(), default=0))
        assert len(checked) <= budget or len(checked) == sum(oldest.values())
        for w in sorted(model)[:closed]:  # close the oldest ids
            ext.remove({model.pop(w): 1})
        checked = [w for w in checked if w in model]
        ext.remove(Counter(model[w] for w in checked))
        for w in checked:
            model[w] = epoch
        for _ in range(opened):
            model[next_id] = epoch
            next_id += 1
        ext.add(epoch, len(checked) + opened)
        ext.record(epoch, len(checked) + opened + closed + 1, rows)
        assert ext.footprints == dict(Counter(model.values()))
        start = ext.start(epoch)
        assert start == min(model.values(), default=epoch)
        assert start >= last_start
        last_start = start
        assert all(e >= start for e in ext.epochs)


def test_rebuilt_from_a_recovery() -> None:
    ext = Extent.rebuilt([(3, 2), (5, 1)], [(3, 4, 10), (4, 1, 7), (5, 2, 8)])
    assert ext.open == 3 and ext.start(6) == 3 and ext.extent_rows(5) == 7 and ext.replay_rows(5) == 15
