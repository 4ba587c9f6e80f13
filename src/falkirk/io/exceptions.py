"""Errors of sources and sinks."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class SourceError(FalkirkError):
    """A source cannot give an epoch the input it must (the message says why and what
    to do)."""


class InputChangedError(SourceError):
    """Input an epoch was planned with changed or disappeared: replaying it would
    read other rows than the first time, so the pipeline stops rather than produce
    a result no single run could have produced."""


class LateInputError(SourceError):
    """A file arrived whose name sorts before input already consumed: it cannot be
    read in name order any more."""


class SinkError(FalkirkError):
    """A sink cannot write, commit or roll back an epoch (the message says why and
    what to do)."""
