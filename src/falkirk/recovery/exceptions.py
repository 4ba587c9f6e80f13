"""Errors of the recovery layer (metadata, solver, monitor, scenarios)."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class RecoveryError(FalkirkError):
    """Recovery metadata or a rollback request is inconsistent."""


class TopologyError(RecoveryError):
    """The dataflow description is malformed (unknown processor, bad projection)."""


class CheckpointError(RecoveryError):
    """A checkpoint's metadata Ξ(p, f) is malformed or out of order."""


class ScenarioError(RecoveryError):
    """A scenario file does not follow the format in docs/scenarios.md."""
