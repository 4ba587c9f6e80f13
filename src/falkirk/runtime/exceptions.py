"""Errors raised by :mod:`falkirk.runtime`."""

from __future__ import annotations

from falkirk.exceptions import InvariantError


class EngineInvariantError(InvariantError):
    """An invariant of the engine's epoch loop does not hold (a bug in Falkirk)."""
