"""The root of every error Falkirk raises.

Catch :class:`FalkirkError` to handle any Falkirk failure; each package defines its
own subclasses in its ``exceptions`` module.
"""

from __future__ import annotations


class FalkirkError(Exception):
    """Base class of all Falkirk errors. Messages say what was seen, what was
    expected, and how to fix it."""


class InvariantError(FalkirkError, RuntimeError):
    """An invariant of the engine does not hold: a bug in Falkirk, not in the
    pipeline or its data. The message says what was expected; please report it with
    the run's log. Nothing committed is lost: a restart recovers from the metadata."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} (an invariant of Falkirk broke: please report this with the log)")
