"""JSON forms of domains, times and frontiers (the scenario format, docs/scenarios.md).

* domain: ``"epoch"``, ``"seq"``, ``"product"`` or
  ``{"kind": "product", "order": "product" | "lexicographic", "depth": 2}``;
* time: ``3`` (epoch), ``[epoch, iteration]`` (product), ``[edge, n]`` (sequence number);
* frontier: ``"top"``, ``[]`` (∅) or the list of maximal times. An unbounded coordinate
  is read from ``"inf"`` or ``Infinity`` and written as a float infinity (``Infinity``
  in Python's JSON).
"""

from __future__ import annotations

from typing import Any

from falkirk.time.domains import Domain, EpochDomain, ProductDomain, SeqDomain, Time
from falkirk.time.exceptions import TimeError
from falkirk.time.frontier import Frontier


def domain_from_json(value: object) -> Domain:
    """Parse a domain; raises :class:`TimeError` saying which forms are accepted."""
    if value == "epoch":
        return EpochDomain()
    if value == "seq":
        return SeqDomain()
    if value == "product":
        return ProductDomain()
    if value == "lexicographic":
        return ProductDomain(order="lexicographic")
    if isinstance(value, dict) and value.get("kind") in ("epoch", "seq") and len(value) == 1:
        return domain_from_json(value["kind"])
    if isinstance(value, dict) and value.get("kind") == "product":
        unknown = set(value) - {"kind", "order", "depth"}
        if unknown:
            raise TimeError(f"product domain: unknown keys {sorted(unknown)} in {value!r}")
        return ProductDomain(depth=value.get("depth", 2), order=value.get("order", "product"))
    raise TimeError(
        f"unknown time domain {value!r}: expected \"epoch\", \"seq\", \"product\" or "
        '{"kind": "product", "order": "product"|"lexicographic", "depth": 2}'
    )


def domain_to_json(domain: Domain) -> object:
    if isinstance(domain, ProductDomain):
        return {"kind": "product", "order": domain.order, "depth": domain.depth}
    return domain.kind


def frontier_from_json(domain: Domain, value: object) -> Frontier:
    """Parse ``"top"``, ``[]`` or a list of times into a canonical frontier."""
    if value == "top":
        return Frontier.top(domain)
    if not isinstance(value, list):
        raise TimeError(
            f"a frontier must be \"top\", [] or a list of maximal times, got {value!r}"
        )
    return Frontier.down(domain, value)


def time_to_json(t: Time) -> Any:
    return list(t) if isinstance(t, tuple) else t


def frontier_to_json(f: Frontier) -> Any:
    """``"top"`` or the sorted list of maximal times."""
    if f.maxima is None:
        return "top"
    return [time_to_json(t) for t in f.maxima]
