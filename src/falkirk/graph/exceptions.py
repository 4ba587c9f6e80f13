"""Errors in a pipeline's description."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class GraphError(FalkirkError):
    """The pipeline is malformed; the message names the processor and the fix."""


class PipelineChangedError(GraphError):
    """A restart's pipeline would read the state its storage root holds as something
    else (a keyed processor's keys, functions, state columns or policy changed); the
    message has one line per changed processor."""
