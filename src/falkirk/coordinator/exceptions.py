"""Errors raised by :mod:`falkirk.coordinator`."""

from __future__ import annotations

from falkirk.exceptions import InvariantError


class RecoveryInvariantError(InvariantError):
    """An invariant of a recovery (the rollback, restore and replay of state) does not hold (a bug in Falkirk)."""
