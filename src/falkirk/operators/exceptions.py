"""Errors raised by :mod:`falkirk.operators`."""

from __future__ import annotations

from falkirk.exceptions import InvariantError


class OperatorInvariantError(InvariantError):
    """An invariant of an operator (its state, its checkpoints) does not hold (a bug in Falkirk)."""
