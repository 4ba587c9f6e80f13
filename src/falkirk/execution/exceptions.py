"""Errors raised by :mod:`falkirk.execution`."""

from __future__ import annotations

from falkirk.exceptions import InvariantError


class EpochInvariantError(InvariantError):
    """An invariant of an epoch's computation or its stages (loops, regions, persistence) does not hold (a bug in Falkirk)."""
