"""Frontiers in each domain: construction, membership, order, meet and join."""

from __future__ import annotations

import pytest

from falkirk.time import (
    INF,
    DomainMismatchError,
    Frontier,
    ProductDomain,
    TimeError,
    domain_from_json,
    frontier_from_json,
    frontier_to_json,
)
from tests.domains import E, L, P, S, down


class TestEpochs:
    def test_down_keeps_the_maximum(self) -> None:
        assert down(E, 1, 3, 2).maxima == (3,)
        assert down(E, 3).contains(0) and down(E, 3).contains(3)
        assert not down(E, 3).contains(4)

    def test_top_and_empty(self) -> None:
        assert Frontier.empty(E) <= down(E, 0) <= Frontier.top(E)
        assert not Frontier.top(E) <= down(E, 10**9)
        with pytest.raises(TimeError, match="use \"top\""):
            down(E, "inf")

    def test_meet_join(self) -> None:
        assert down(E, 3) & down(E, 5) == down(E, 3)
        assert down(E, 3) | down(E, 5) == down(E, 5)
        assert down(E, 3) & Frontier.top(E) == down(E, 3)
        assert down(E, 3) | Frontier.empty(E) == down(E, 3)

    @pytest.mark.parametrize("bad", [-1, 1.5, "x", True, None, [1, 2]])
    def test_rejects_bad_times(self, bad: object) -> None:
        with pytest.raises(TimeError):
            down(E, bad)


class TestProductOrder:
    def test_antichain_drops_dominated(self) -> None:
        f = down(P, [1, 5], [2, 3], [1, 2], [2, 3])
        assert f.maxima == ((1, 5), (2, 3))
        assert (1, 4) in f and (2, 0) in f and (0, 5) in f
        assert (2, 4) not in f and (3, 0) not in f

    def test_subset_is_not_total(self) -> None:
        a, b = down(P, [1, 5]), down(P, [2, 3])
        assert not a <= b and not b <= a
        assert a <= a | b and b <= a | b
        assert a & b == down(P, [1, 3])

    def test_meet_of_antichains(self) -> None:
        a = down(P, [1, 5], [3, 1])
        b = down(P, [2, 2])
        assert a & b == down(P, [1, 2], [2, 1])

    def test_unbounded_coordinate(self) -> None:
        f = down(P, [3, "inf"])
        assert (3, 10**6) in f and (4, 0) not in f
        assert down(P, [INF, INF]).is_top

    def test_depth_three(self) -> None:
        d3 = ProductDomain(depth=3)
        assert (1, 2, 3) in down(d3, [1, 2, 3])
        with pytest.raises(TimeError, match="3 coordinates"):
            down(d3, [1, 2])


class TestLexicographic:
    def test_single_maximum_and_order(self) -> None:
        f = down(L, [1, 5], [2, 3])
        assert f.maxima == ((2, 3),)
        assert (1, 99) in f and (2, 3) in f and (2, 4) not in f

    def test_inf_normalises_trailing_coordinates(self) -> None:
        d3 = ProductDomain(depth=3, order="lexicographic")
        assert down(d3, [3, "inf", 5]) == down(d3, [3, "inf", "inf"])
        assert down(L, ["inf", 0]).is_top


class TestSequenceNumbers:
    def test_comparable_only_on_the_same_edge(self) -> None:
        f = down(S, ["e1", 4], ["e2", 7])
        assert ("e1", 4) in f and ("e2", 1) in f and ("e1", 5) not in f and ("e3", 0) not in f
        assert down(S, ["e1", 3]) <= f
        assert not down(S, ["e3", 1]) <= f

    def test_meet_and_join_per_edge(self) -> None:
        a = down(S, ["e1", 4], ["e2", 7])
        b = down(S, ["e1", 6], ["e3", 1])
        assert a & b == down(S, ["e1", 4])
        assert a | b == down(S, ["e1", 6], ["e2", 7], ["e3", 1])

    def test_bad_time(self) -> None:
        with pytest.raises(TimeError, match=r"\[edge_name, n\]"):
            down(S, 3)


def test_domains_do_not_mix() -> None:
    with pytest.raises(DomainMismatchError, match="different time domains"):
        _ = down(E, 1) <= down(L, [1, 1])


def test_repr_is_readable() -> None:
    assert repr(Frontier.top(E)) == "⊤"
    assert repr(Frontier.empty(E)) == "∅"
    assert repr(down(L, [1, "inf"])) == "↓{(1, ∞)}"
    assert repr(down(S, ["e1", 4], ["e2", 7])) == "↓{e1:4, e2:7}"


class TestJson:
    @pytest.mark.parametrize(
        ("spec", "domain"),
        [
            ("epoch", E),
            ("seq", S),
            ("product", P),
            ({"kind": "product", "order": "lexicographic"}, L),
            ("lexicographic", L),
            ({"kind": "product", "depth": 3}, ProductDomain(depth=3)),
        ],
    )
    def test_domains(self, spec: object, domain: object) -> None:
        assert domain_from_json(spec) == domain

    @pytest.mark.parametrize("bad", ["time", {"kind": "product", "order": "weird"}, {"kind": "x"}, 3])
    def test_bad_domains(self, bad: object) -> None:
        with pytest.raises(TimeError):
            domain_from_json(bad)

    def test_round_trip(self) -> None:
        for domain, value in [(E, [3]), (L, [[1, 4]]), (S, [["e1", 4], ["e2", 7]]), (E, "top"), (P, [])]:
            assert frontier_to_json(frontier_from_json(domain, value)) == value
        assert frontier_to_json(frontier_from_json(L, [[3, "inf"]])) == [[3, INF]]

    def test_frontier_must_be_a_list(self) -> None:
        with pytest.raises(TimeError, match="frontier must be"):
            frontier_from_json(E, 3)
