"""Time domains: the kinds of logical time a processor can use, with their orders.

Every event at a processor (a message delivery or a notification) carries a logical
time. Falkirk supports the three families of section 3.1 of the Falkirk Wheel paper:

* :class:`EpochDomain` - an epoch is a non-negative int; epochs are totally ordered.
* :class:`ProductDomain` - ``(epoch, iteration[, ...])`` tuples for loops, under either
  the product (componentwise) partial order or the lexicographic total order
  (section 4.1 imposes the lexicographic order for checkpointing).
* :class:`SeqDomain` - ``(edge, n)``: the n-th message on an edge; two sequence numbers
  are comparable only when they are on the same edge.

A domain knows how to compare times, how to reduce a set of times to the antichain
of its maximal elements (the canonical representation of a frontier), and how to
intersect two frontiers given by their maxima. A coordinate may be ``INF``
(unbounded) inside a frontier's maxima: ``(3, INF)`` stands for every iteration of
epoch 3. Domains are immutable values: two equal domains are interchangeable.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from falkirk.time.exceptions import TimeError

INF: float = math.inf
"""An unbounded coordinate, allowed only in the maximal times of a frontier."""

Coord = int | float
"""A coordinate of a time: a non-negative int, or ``INF`` in a frontier's maxima."""

Time = int | float | tuple[Any, ...]
"""An epoch (int), a product time (tuple of coordinates) or a sequence number
``(edge, n)``."""

Order = Literal["product", "lexicographic"]


def _coord(value: object, what: str) -> Coord:
    """Validate one coordinate: a non-negative int or INF (``"inf"`` accepted)."""
    if isinstance(value, str) and value.lower() in ("inf", "infinity"):
        return INF
    if isinstance(value, float) and value == INF:
        return INF
    if isinstance(value, bool) or not isinstance(value, int):
        raise TimeError(
            f"{what}: expected a non-negative integer or 'inf', got {value!r}"
        )
    if value < 0:
        raise TimeError(f"{what}: expected a non-negative integer, got {value}")
    return value


class Domain(ABC):
    """A set of logical times with a partial order (see the module docstring)."""

    @property
    @abstractmethod
    def kind(self) -> str:
        """``"epoch"``, ``"product"`` or ``"seq"``."""

    @property
    @abstractmethod
    def total(self) -> bool:
        """True when every two times are comparable (frontiers then have one maximum)."""

    @abstractmethod
    def check(self, value: object) -> Time:
        """Validate ``value`` as a time of this domain and return its canonical form.

        Raises :class:`TimeError` naming the value and what was expected."""

    @abstractmethod
    def leq(self, a: Time, b: Time) -> bool:
        """``a <= b`` in this domain's order (False for incomparable times)."""

    @abstractmethod
    def maxima(self, times: Iterable[Time]) -> tuple[Time, ...]:
        """The maximal elements of ``times``, deduplicated and sorted: the canonical
        representation of the frontier ``↓times``. Times must already be checked."""

    @abstractmethod
    def meet(self, a: tuple[Time, ...], b: tuple[Time, ...]) -> tuple[Time, ...]:
        """The maxima of ``↓a ∩ ↓b`` for two canonical antichains."""

    def is_everything(self, maxima: tuple[Time, ...]) -> bool:
        """True when ``↓maxima`` holds every time of the domain (it is then ⊤)."""
        return False

    def sort_key(self, t: Time) -> tuple[object, ...]:
        """A key that sorts times deterministically for display and output."""
        return t if isinstance(t, tuple) else (t,)


@dataclass(frozen=True, slots=True)
class EpochDomain(Domain):
    """Epochs: non-negative ints, totally ordered."""

    @property
    def kind(self) -> str:
        return "epoch"

    @property
    def total(self) -> bool:
        return True

    @property
    def depth(self) -> int:
        """Epochs are products of depth 1 for loop entry and exit."""
        return 1

    def check(self, value: object) -> Time:
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        epoch = _coord(value, "epoch time")
        if epoch == INF:
            raise TimeError("epoch time: expected a non-negative integer, got 'inf' (use \"top\" for ⊤)")
        return epoch

    def leq(self, a: Any, b: Any) -> bool:
        return bool(a <= b)

    def maxima(self, times: Iterable[Any]) -> tuple[Time, ...]:
        best: Any = None
        for t in times:
            if best is None or t > best:
                best = t
        return () if best is None else (best,)

    def meet(self, a: tuple[Time, ...], b: tuple[Time, ...]) -> tuple[Time, ...]:
        if not a or not b:
            return ()
        return (min(a[0], b[0]),)

    def is_everything(self, maxima: tuple[Time, ...]) -> bool:
        return bool(maxima) and maxima[0] == INF

    def __repr__(self) -> str:
        return "epoch"


@dataclass(frozen=True, slots=True)
class ProductDomain(Domain):
    """Tuples ``(epoch, iteration, ...)`` of ``depth`` coordinates.

    ``order="product"`` compares componentwise (a partial order: (1, 5) and (2, 3)
    are incomparable); ``order="lexicographic"`` compares as tuples (total).
    """

    depth: int = 2
    order: Order = "product"

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 2:
            raise TimeError(
                f"product domain depth must be an int >= 2 (epochs are depth 1), got {self.depth!r}"
            )
        if self.order not in ("product", "lexicographic"):
            raise TimeError(
                f"product domain order must be 'product' or 'lexicographic', got {self.order!r}"
            )

    @property
    def kind(self) -> str:
        return "product"

    @property
    def total(self) -> bool:
        return self.order == "lexicographic"

    def check(self, value: object) -> Time:
        if not isinstance(value, (list, tuple)) or len(value) != self.depth:
            raise TimeError(
                f"product time: expected a list of {self.depth} coordinates "
                f"[epoch, iteration, ...], got {value!r}"
            )
        coords = [_coord(v, "product time coordinate") for v in value]
        if self.order == "lexicographic":
            # After an unbounded coordinate the rest add nothing in lexicographic order.
            for i, c in enumerate(coords):
                if c == INF:
                    coords[i:] = [INF] * (self.depth - i)
                    break
        return tuple(coords)

    def leq(self, a: Any, b: Any) -> bool:
        if self.order == "lexicographic":
            return bool(a <= b)
        return all(x <= y for x, y in zip(a, b, strict=True))

    def maxima(self, times: Iterable[Any]) -> tuple[Time, ...]:
        if self.order == "lexicographic":
            best: Any = None
            for t in times:
                if best is None or t > best:
                    best = t
            return () if best is None else (best,)
        unique = sorted(set(times), key=self.sort_key)
        kept = [
            t
            for t in unique
            if not any(u != t and self.leq(t, u) for u in unique)
        ]
        return tuple(kept)

    def meet(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Time, ...]:
        if not a or not b:
            return ()
        if self.order == "lexicographic":
            return (min(a[0], b[0]),)
        return self.maxima(
            tuple(min(x, y) for x, y in zip(s, t, strict=True))
            for s in a
            for t in b
        )

    def is_everything(self, maxima: tuple[Any, ...]) -> bool:
        for m in maxima:
            if self.order == "lexicographic":
                if m[0] == INF:
                    return True
            elif all(c == INF for c in m):
                return True
        return False

    def __repr__(self) -> str:
        return f"product(depth={self.depth}, order={self.order})"


@dataclass(frozen=True, slots=True)
class SeqDomain(Domain):
    """Sequence numbers ``(edge, n)``: comparable only on the same edge."""

    @property
    def kind(self) -> str:
        return "seq"

    @property
    def total(self) -> bool:
        return False

    def check(self, value: object) -> Time:
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 2
            or not isinstance(value[0], str)
            or not value[0]
        ):
            raise TimeError(
                f"sequence-number time: expected [edge_name, n], got {value!r}"
            )
        return (value[0], _coord(value[1], f"sequence number on edge {value[0]!r}"))

    def leq(self, a: Any, b: Any) -> bool:
        return bool(a[0] == b[0] and a[1] <= b[1])

    def maxima(self, times: Iterable[Any]) -> tuple[Time, ...]:
        best: dict[str, Coord] = {}
        for t in times:
            edge, n = t[0], t[1]
            if edge not in best or n > best[edge]:
                best[edge] = n
        return tuple((edge, best[edge]) for edge in sorted(best))

    def meet(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Time, ...]:
        other = {t[0]: t[1] for t in b}
        out: list[Time] = []
        for t in a:
            if t[0] in other:
                out.append((t[0], min(t[1], other[t[0]])))
        return tuple(out)

    def part_on(self, maxima: tuple[Any, ...], edge: str) -> tuple[Time, ...]:
        """The maxima of a frontier restricted to the times on ``edge``."""
        return tuple(t for t in maxima if t[0] == edge)

    def __repr__(self) -> str:
        return "seq"


def epoch_like_depth(domain: Domain) -> int:
    """Depth of a domain that can take part in loop entry/exit (epochs count as 1).

    Raises :class:`TimeError` for sequence-number domains."""
    if isinstance(domain, EpochDomain):
        return 1
    if isinstance(domain, ProductDomain):
        return domain.depth
    raise TimeError(
        f"loop projections need an epoch or product domain at both ends, got {domain!r}"
    )
