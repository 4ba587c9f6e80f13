"""Edge projections φ(e), section 3.2."""

from __future__ import annotations

import pytest

from falkirk.time import (
    INF,
    DomainMismatchError,
    Empty,
    EpochDomain,
    EpochToSeq,
    Feedback,
    Frontier,
    Identity,
    LoopEntry,
    LoopExit,
    ProductDomain,
    Recorded,
    SeqToEpoch,
    TimeError,
    projection_for,
)
from tests.domains import E, L, P, S, down

TOP_E, EMPTY_E = Frontier.top(E), Frontier.empty(E)



def test_identity() -> None:
    assert Identity(E)(down(E, 4)) == down(E, 4)


@pytest.mark.parametrize("target", [P, L])
def test_loop_entry_adds_every_iteration(target: ProductDomain) -> None:
    phi = LoopEntry(E, target)
    assert phi(down(E, 3)) == down(target, [3, "inf"])
    assert (3, 10**9) in phi(down(E, 3)) and (4, 0) not in phi(down(E, 3))
    assert phi(TOP_E).is_top and phi(EMPTY_E).is_empty


def test_loop_exit_lexicographic() -> None:
    phi = LoopExit(L, E)
    assert phi(down(L, [3, 5])) == down(E, 2)  # epoch 3 still has iterations to run
    assert phi(down(L, [3, 0])) == down(E, 2)
    assert phi(down(L, [3, "inf"])) == down(E, 3)
    assert phi(down(L, [0, 7])).is_empty
    assert phi(Frontier.top(L)).is_top


def test_loop_exit_product_order() -> None:
    phi = LoopExit(P, E)
    assert phi(down(P, [3, 5])).is_empty  # no epoch has all of its iterations
    assert phi(down(P, [2, "inf"], [4, 1])) == down(E, 2)


def test_nested_loop_exit_lexicographic() -> None:
    d3 = ProductDomain(depth=3, order="lexicographic")
    phi = LoopExit(d3, L)
    assert phi(down(d3, [1, 4, 2])) == down(L, [1, 3])
    assert phi(down(d3, [1, 0, 2])) == down(L, [0, INF])


def test_nested_loop_exit_product() -> None:
    d3 = ProductDomain(depth=3)
    phi = LoopExit(d3, P)
    assert phi(down(d3, [1, 4, "inf"], [2, 2, 2])) == down(P, [1, 4])


def test_feedback_increments_the_iteration() -> None:
    assert Feedback(L)(down(L, [1, 3])) == down(L, [1, 4])
    assert Feedback(P)(down(P, [1, 3], [2, 1])) == down(P, [1, 4], [2, 2])
    assert Feedback(L)(down(L, [1, "inf"])) == down(L, [1, "inf"])


def test_recorded_and_empty_are_safe_defaults() -> None:
    assert Recorded(E, S)(down(E, 3)).is_empty
    assert Empty(E, E)(down(E, 3)).is_empty


@pytest.mark.parametrize(
    "phi",
    [Identity(E), Recorded(E, S), Empty(E, E), LoopEntry(E, L), LoopExit(L, E), Feedback(P),
     EpochToSeq("e", {1: 4}), SeqToEpoch("e", {1: 4})],
    ids=lambda phi: phi.kind,
)
def test_every_projection_maps_top_to_top(phi) -> None:  # type: ignore[no-untyped-def]
    # A processor that has not failed (⊤) keeps everything it sent: its receivers may
    # keep everything they got. A default of ∅ at ⊤ made φ non-monotone and rolled
    # back processors that never failed (issue: data loss, finding 7).
    assert phi(Frontier.top(phi.source)).is_top


def test_translators() -> None:
    to_seq = EpochToSeq("e", {1: 73, 2: 100})
    assert to_seq(down(E, 1)) == down(S, ["e", 73])
    assert to_seq(down(E, 5)) == down(S, ["e", 100])
    assert to_seq(down(E, 0)).is_empty
    to_epoch = SeqToEpoch("e", {1: 73, 2: 100})
    assert to_epoch(down(S, ["e", 99])) == down(E, 1)
    assert to_epoch(down(S, ["e", 100], ["other", 5])) == down(E, 2)
    assert to_epoch(down(S, ["other", 500])).is_empty
    with pytest.raises(TimeError, match="must not decrease"):
        EpochToSeq("e", {1: 5, 2: 3})


def test_wrong_domain_is_refused() -> None:
    with pytest.raises(DomainMismatchError, match="expects a frontier"):
        Identity(E)(down(L, [1, 1]))


@pytest.mark.parametrize(
    ("kind", "src", "dst", "message"),
    [
        ("identity", E, L, "same domain"),
        ("loop_entry", E, E, "depth k\\+1"),
        ("loop_exit", L, L, "depth k"),
        ("loop_exit", ProductDomain(depth=3, order="lexicographic"), P, "same order"),
        ("feedback", E, E, "same product domain"),
        ("nonsense", E, E, "unknown projection"),
    ],
)
def test_projection_for_checks_domains(kind: str, src, dst, message: str) -> None:
    with pytest.raises(TimeError, match=message):
        projection_for(kind, src, dst)


@pytest.mark.parametrize(
    "phi",
    [Identity(L), LoopEntry(E, L), LoopExit(L, E), Feedback(L), LoopExit(P, E), Feedback(P)],
    ids=lambda p: p.kind,
)
def test_projections_are_monotone_on_a_grid(phi) -> None:
    src = phi.source
    if isinstance(src, EpochDomain):
        frontiers = [down(E, t) for t in range(5)]
    else:
        frontiers = [down(src, [a, b]) for a in range(3) for b in [*range(3), "inf"]]
        frontiers += [down(src, [0, 2], [2, 0])] if src.order == "product" else []
    frontiers += [Frontier.empty(src), Frontier.top(src)]
    for f in frontiers:
        for g in frontiers:
            if f <= g:
                assert phi(f) <= phi(g), (f, g)
