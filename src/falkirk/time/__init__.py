"""Logical times, frontiers and edge projections (pure Python, no pyspark).

This is the vocabulary of the Falkirk Wheel paper, sections 2-3: every event has a
logical time in its processor's :class:`Domain`; a processor rolls back to a
:class:`Frontier` (a downward-closed set of times); an edge's :class:`Projection`
carries a frontier into the receiver's domain.
"""

from __future__ import annotations

from falkirk.time.codec import domain_from_json, frontier_from_json, frontier_to_json
from falkirk.time.domains import INF, Domain, EpochDomain, ProductDomain, SeqDomain, Time
from falkirk.time.exceptions import DomainMismatchError, TimeError
from falkirk.time.frontier import Frontier
from falkirk.time.projection import (
    Empty,
    EpochToSeq,
    Feedback,
    Identity,
    LoopEntry,
    LoopExit,
    Projection,
    Recorded,
    SeqToEpoch,
    projection_for,
)

__all__ = [
    "INF",
    "Domain",
    "DomainMismatchError",
    "Empty",
    "EpochDomain",
    "EpochToSeq",
    "Feedback",
    "Frontier",
    "Identity",
    "LoopEntry",
    "LoopExit",
    "ProductDomain",
    "Projection",
    "Recorded",
    "SeqDomain",
    "SeqToEpoch",
    "Time",
    "TimeError",
    "domain_from_json",
    "frontier_from_json",
    "frontier_to_json",
    "projection_for",
]
