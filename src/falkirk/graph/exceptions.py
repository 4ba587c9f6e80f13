"""Errors in a pipeline's description."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class GraphError(FalkirkError):
    """The pipeline is malformed; the message names the processor and the fix."""
