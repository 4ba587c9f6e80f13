"""Errors raised by :mod:`falkirk.control`."""

from __future__ import annotations

from falkirk.exceptions import InvariantError


class ControlInvariantError(InvariantError):
    """An invariant of the control plane (the ledger, the time domains) does not hold (a bug in Falkirk)."""
