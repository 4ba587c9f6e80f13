"""Errors of the logical-time layer."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class TimeError(FalkirkError):
    """A time, frontier or projection is malformed or used across domains."""


class DomainMismatchError(TimeError):
    """Two frontiers of different time domains were combined, or a projection was
    applied to a frontier of the wrong domain."""
