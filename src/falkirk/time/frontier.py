"""Frontiers: the downward-closed sets of logical times a processor rolls back to.

A frontier f is a set of times closed downwards: if t is in f, so is every t' <= t
(section 3.1 of the Falkirk Wheel paper). Rolling a processor back to f keeps the
effect of exactly the events whose times are in f. A frontier is represented by the
antichain of its maximal times, plus two special values: ⊤ (every time; the state of
a processor that has not failed) and ∅ (no time; the initial state).

Frontiers are immutable values. ``f <= g`` is set inclusion, ``f & g`` intersection
(meet), ``f | g`` union (join); both results are again frontiers. Build them with
:meth:`Frontier.down`, :meth:`Frontier.top` and :meth:`Frontier.empty`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from falkirk.time.domains import INF, Domain, Time
from falkirk.time.exceptions import DomainMismatchError


@dataclass(frozen=True, slots=True)
class Frontier:
    """A downward-closed set of times of one domain.

    ``maxima`` is the canonical sorted antichain of maximal times, or ``None`` for ⊤.
    Construct with :meth:`down`, :meth:`top` or :meth:`empty`, which canonicalise;
    the raw constructor trusts its arguments.
    """

    domain: Domain
    maxima: tuple[Time, ...] | None

    # -- construction ---------------------------------------------------------------

    @classmethod
    def top(cls, domain: Domain) -> Frontier:
        """⊤: every time of ``domain``."""
        return cls(domain, None)

    @classmethod
    def empty(cls, domain: Domain) -> Frontier:
        """∅: no time (a processor's initial state)."""
        return cls(domain, ())

    @classmethod
    def down(cls, domain: Domain, times: Iterable[object]) -> Frontier:
        """↓T: the smallest frontier containing every time in ``times``.

        Each time is validated by the domain (raising :class:`TimeError` with the bad
        value); redundant times are dropped. A frontier holding every time is ⊤.
        """
        maxima = domain.maxima(domain.check(t) for t in times)
        if domain.is_everything(maxima):
            return cls(domain, None)
        return cls(domain, maxima)

    # -- queries --------------------------------------------------------------------

    @property
    def is_top(self) -> bool:
        return self.maxima is None

    @property
    def is_empty(self) -> bool:
        return self.maxima == ()

    def contains(self, t: Time) -> bool:
        """True when time ``t`` (already valid in this domain) is in the frontier."""
        if self.maxima is None:
            return True
        leq = self.domain.leq
        return any(leq(t, m) for m in self.maxima)

    def __contains__(self, t: object) -> bool:
        return self.contains(self.domain.check(t))

    def issubset(self, other: Frontier) -> bool:
        """``self ⊆ other``."""
        self._same_domain(other, "compare")
        mine, theirs = self.maxima, other.maxima
        if theirs is None or mine is theirs:
            return True
        if mine is None:
            return False
        if self.domain.total:
            # Epochs and lexicographic tuples compare natively; one maximum each.
            low: Any = mine[0] if mine else None
            return low is None or (bool(theirs) and bool(low <= theirs[0]))
        leq = self.domain.leq
        return all(any(leq(a, b) for b in theirs) for a in mine)

    def __le__(self, other: Frontier) -> bool:
        return self.issubset(other)

    def __lt__(self, other: Frontier) -> bool:
        return self.issubset(other) and self.maxima != other.maxima

    def __ge__(self, other: Frontier) -> bool:
        return other.issubset(self)

    def __gt__(self, other: Frontier) -> bool:
        return other.issubset(self) and self.maxima != other.maxima

    # -- lattice operations -----------------------------------------------------------

    def meet(self, other: Frontier) -> Frontier:
        """``self ∩ other`` (a frontier: intersections of down-sets are down-sets)."""
        self._same_domain(other, "intersect")
        if self.maxima is None:
            return other
        if other.maxima is None:
            return self
        return Frontier(self.domain, self.domain.meet(self.maxima, other.maxima))

    def join(self, other: Frontier) -> Frontier:
        """``self ∪ other``."""
        self._same_domain(other, "unite")
        if self.maxima is None or other.maxima is None:
            return Frontier(self.domain, None)
        maxima = self.domain.maxima(self.maxima + other.maxima)
        return Frontier(self.domain, None if self.domain.is_everything(maxima) else maxima)

    def __and__(self, other: Frontier) -> Frontier:
        return self.meet(other)

    def __or__(self, other: Frontier) -> Frontier:
        return self.join(other)

    # -- display --------------------------------------------------------------------

    def __repr__(self) -> str:
        if self.maxima is None:
            return "⊤"
        if not self.maxima:
            return "∅"
        return "↓{" + ", ".join(show_time(t) for t in self.maxima) + "}"

    def _same_domain(self, other: Frontier, verb: str) -> None:
        if self.domain is not other.domain and self.domain != other.domain:
            raise DomainMismatchError(
                f"cannot {verb} frontiers of different time domains: {self!r} is in "
                f"{self.domain!r}, {other!r} is in {other.domain!r}; project one with "
                "the edge's projection first"
            )


def show_time(t: Time) -> str:
    """A time for people: 3, (1, 4), e1:7, with ∞ for unbounded coordinates."""
    if isinstance(t, tuple):
        if len(t) == 2 and isinstance(t[0], str):
            return f"{t[0]}:{_coord_str(t[1])}"
        return "(" + ", ".join(_coord_str(c) for c in t) + ")"
    return _coord_str(t)


def _coord_str(c: object) -> str:
    return "∞" if c == INF else str(c)
