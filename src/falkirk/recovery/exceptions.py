"""Errors of the recovery layer (metadata, solver, monitor, scenarios)."""

from __future__ import annotations

from falkirk.exceptions import FalkirkError


class RecoveryError(FalkirkError):
    """Recovery metadata or a rollback request is inconsistent."""


class TopologyError(RecoveryError):
    """The dataflow description is malformed (unknown processor, bad projection)."""


class CheckpointError(RecoveryError):
    """A checkpoint's metadata Ξ(p, f) is malformed or out of order."""


class ChainError(RecoveryError, ValueError):
    """A keyed processor's checkpoint chain cannot be read as asked: an entry's kind
    is not one Falkirk writes, or no entries restore the version asked for (see
    :mod:`falkirk.recovery.chain`). Also a ``ValueError``, as the errors it replaced
    were."""


class ScenarioError(RecoveryError):
    """A scenario file does not follow the format in docs/scenarios.md."""
