"""Operators declare what the graph's scope checks need (translator structure, whether
they fit in a region, whether their state ages by epochs, whether they notify); the
checks read the declarations, never a kind's name, so an operator added by a user is
checked by what it declares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from falkirk.graph import GraphError
from falkirk.graph.scopes import out_scope, scope_of
from falkirk.graph.specs import (
    BufferSpec,
    EnterSpec,
    FeedbackSpec,
    JoinSpec,
    LeaveSpec,
    LookupSpec,
    MapSpec,
    NumberSpec,
    OperatorSpec,
    RegroupSpec,
    SinkSpec,
    SourceSpec,
    StatefulSpec,
    Structure,
)

LOOPS, REGIONS = {"loop"}, {"region"}


def identity(df: object) -> object:
    return df


@pytest.mark.parametrize(
    ("spec", "structure", "translates", "fits_regions", "ages", "notifies"),
    [
        (MapSpec(fn=identity), None, None, True, False, False),
        (SourceSpec(), None, None, False, False, False),
        (SinkSpec(), None, None, False, False, False),
        (JoinSpec(on=("k",)), None, None, False, True, False),
        (LookupSpec(on=("k",)), None, None, False, True, False),
        (BufferSpec(), None, None, False, False, False),
        (BufferSpec(retain=2), None, None, False, True, False),
        (StatefulSpec(key=("k",), fn=identity, on_epoch_end=identity), None, None, True, False, True),
        (EnterSpec(loop="loop"), Structure.LOOP_ENTER, "loop", True, False, False),
        (FeedbackSpec(loop="loop", schema="v long"), Structure.LOOP_FEEDBACK, "loop", True, False, False),
        (LeaveSpec(loop="loop"), Structure.LOOP_LEAVE, "loop", True, False, False),
        (NumberSpec(sequence="region"), Structure.REGION_NUMBER, "region", True, False, False),
        (RegroupSpec(sequence="region"), Structure.REGION_REGROUP, "region", True, False, False),
    ],
)
def test_each_kind_declares_its_traits(spec: OperatorSpec, structure: Structure | None, translates: str | None, fits_regions: bool, ages: bool, notifies: bool) -> None:
    assert (spec.structure, spec.translates, spec.fits_regions, spec.ages_by_epochs, spec.notifies) == (structure, translates, fits_regions, ages, notifies)


def test_translators_move_rows_between_scopes() -> None:
    assert scope_of("n", NumberSpec(sequence="region"), {None}, LOOPS, REGIONS) is None
    assert out_scope(NumberSpec(sequence="region"), None) == "region"
    assert scope_of("r", RegroupSpec(sequence="region"), {"region"}, LOOPS, REGIONS) == "region"
    assert out_scope(RegroupSpec(sequence="region"), "region") is None
    assert scope_of("e", EnterSpec(loop="loop"), {None}, LOOPS, REGIONS) == "loop"
    assert scope_of("l", LeaveSpec(loop="loop"), {"loop"}, LOOPS, REGIONS) is None
    with pytest.raises(GraphError, match="must read a stream of the epochs"):
        scope_of("e", EnterSpec(loop="loop"), {"loop"}, LOOPS, REGIONS)
    with pytest.raises(GraphError, match="no region named 'elsewhere'"):
        scope_of("n", NumberSpec(sequence="elsewhere"), {None}, LOOPS, REGIONS)


@dataclass(frozen=True)
class Decaying(OperatorSpec):
    """A user's operator whose state forgets rows after some epochs."""

    kind: ClassVar[str] = "decaying"
    fits_regions: ClassVar[bool] = False
    keep: int = 3

    @property
    def ages_by_epochs(self) -> bool:
        return True


def test_a_users_operator_is_checked_by_what_it_declares() -> None:
    with pytest.raises(GraphError, match=r"'d' \(decaying\) cannot be inside loop 'loop' yet"):
        scope_of("d", Decaying(), {"loop"}, LOOPS, REGIONS)
    with pytest.raises(GraphError, match=r"'d' \(decaying\) cannot be inside sequence-number region"):
        scope_of("d", Decaying(), {"region"}, LOOPS, REGIONS)
    assert scope_of("d", Decaying(), {None}, LOOPS, REGIONS) is None


def test_a_notifying_operator_is_refused_in_a_region_only() -> None:
    spec = StatefulSpec(key=("k",), fn=identity, on_epoch_end=identity)
    with pytest.raises(GraphError, match="no notifications exist"):
        scope_of("s", spec, {"region"}, LOOPS, REGIONS)
    assert scope_of("s", spec, {"loop"}, LOOPS, REGIONS) == "loop"
