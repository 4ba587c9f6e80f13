"""The root of every error Falkirk raises.

Catch :class:`FalkirkError` to handle any Falkirk failure; each package defines its
own subclasses in its ``exceptions`` module.
"""

from __future__ import annotations

import contextlib


class FalkirkError(Exception):
    """Base class of all Falkirk errors. Messages say what was seen, what was
    expected, and how to fix it."""


class InvariantError(FalkirkError, RuntimeError):
    """An invariant of the engine does not hold: a bug in Falkirk, not in the
    pipeline or its data. The message says what was expected; please report it with
    the run's log. Nothing committed is lost: a restart recovers from the metadata."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} (an invariant of Falkirk broke: please report this with the log)")


def error_text(exc: BaseException) -> str:
    """``str(exc)``, asked once per exception: a Py4J error asks the JVM for its text
    (its whole Java stack trace) each time, which costs tens of milliseconds, and a
    failure is looked at by several classifiers in turn. An exception whose text
    cannot be had gives its type's name."""
    cached = getattr(exc, "_falkirk_text", None)
    if isinstance(cached, str):
        return cached
    try:
        text = str(exc)
    except Exception:  # a Py4J error whose JVM is gone
        return type(exc).__name__
    with contextlib.suppress(AttributeError):  # an exception type with __slots__
        exc._falkirk_text = text  # type: ignore[attr-defined]
    return text
