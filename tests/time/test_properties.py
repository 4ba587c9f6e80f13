"""Property tests: frontier operations agree with set semantics; projections are monotone.

A frontier is a down-set; its operations must agree with the sets they stand for.
The checks enumerate every time on a grid whose coordinates go one past the largest
finite coordinate used (7), standing in for ∞, which is enough to tell the sets apart.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from falkirk.time import INF, Domain, Feedback, Frontier, LoopEntry, LoopExit
from tests.domains import E, L, P, S

SMALL = 5  # finite coordinates are 0..SMALL
BIG = SMALL + 2  # a grid coordinate beyond every finite one: stands in for ∞
EDGES = ("a", "b", "c")

coord = st.one_of(st.integers(0, SMALL), st.just(INF))


def times(domain: Domain) -> st.SearchStrategy[object]:
    if domain == E:
        return st.integers(0, SMALL)
    if domain == S:
        return st.tuples(st.sampled_from(EDGES), st.integers(0, SMALL)).map(list)
    return st.tuples(coord, coord).map(list)


def frontiers(domain: Domain) -> st.SearchStrategy[Frontier]:
    return st.one_of(
        st.just(Frontier.top(domain)),
        st.lists(times(domain), max_size=4).map(lambda ts: Frontier.down(domain, ts)),
    )


def grid(domain: Domain) -> list[object]:
    if domain == E:
        return list(range(BIG + 1))
    if domain == S:
        return [(e, n) for e in EDGES for n in range(BIG + 1)]
    return list(itertools.product(range(BIG + 1), repeat=2))


def members(f: Frontier) -> set[object]:
    return {t for t in grid(f.domain) if f.contains(t)}  # type: ignore[arg-type]


DOMAINS = [E, P, L, S]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), domain=st.sampled_from(DOMAINS))
def test_lattice_operations_match_sets(data: st.DataObject, domain: Domain) -> None:
    a, b = data.draw(frontiers(domain)), data.draw(frontiers(domain))
    ma, mb = members(a), members(b)
    assert members(a & b) == ma & mb
    assert members(a | b) == ma | mb
    assert (a <= b) == (ma <= mb)
    assert (a == b) == (ma == mb)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), domain=st.sampled_from(DOMAINS))
def test_frontiers_are_down_closed_and_canonical(data: st.DataObject, domain: Domain) -> None:
    ts = data.draw(st.lists(times(domain), max_size=4))
    f = Frontier.down(domain, ts)
    checked = [domain.check(t) for t in ts]
    assert all(f.contains(t) for t in checked)
    for t in grid(domain):
        if any(domain.leq(t, u) for u in checked):  # type: ignore[arg-type]
            assert f.contains(t)  # type: ignore[arg-type]
    if f.maxima is not None:  # an antichain: no maximum below another
        assert not any(domain.leq(x, y) and x != y for x in f.maxima for y in f.maxima)
        assert Frontier.down(domain, [list(m) if isinstance(m, tuple) else m for m in f.maxima]) == f


PROJECTIONS = [LoopEntry(E, L), LoopEntry(E, P), LoopExit(L, E), LoopExit(P, E), Feedback(L), Feedback(P)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), phi=st.sampled_from(PROJECTIONS))
def test_projections_are_monotone_and_keep_the_ends(data: st.DataObject, phi: object) -> None:
    a, b = data.draw(frontiers(phi.source)), data.draw(frontiers(phi.source))  # type: ignore[attr-defined]
    if a <= b:
        assert phi(a) <= phi(b)  # type: ignore[operator]
    assert phi(a & b) <= phi(a) & phi(b)  # type: ignore[operator]
    assert phi(Frontier.empty(phi.source)).is_empty  # type: ignore[attr-defined, operator]
    assert phi(Frontier.top(phi.source)).is_top  # type: ignore[attr-defined, operator]


@settings(max_examples=300, deadline=None)
@given(f=frontiers(L))
def test_loop_exit_keeps_exactly_the_finished_epochs(f: Frontier) -> None:
    out = LoopExit(L, E)(f)
    for epoch in range(BIG):
        finished = all(f.contains((epoch, c)) for c in range(BIG + 1)) and f.contains((epoch, INF))
        assert out.contains(epoch) == finished
