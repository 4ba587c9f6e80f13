"""Shared test vocabulary: the common domains and a frontier shorthand."""

from __future__ import annotations

from falkirk.time import Domain, EpochDomain, Frontier, ProductDomain, SeqDomain

E = EpochDomain()
P = ProductDomain()
L = ProductDomain(order="lexicographic")
S = SeqDomain()


def down(domain: Domain, *times: object) -> Frontier:
    """↓{times} in ``domain``."""
    return Frontier.down(domain, list(times))
