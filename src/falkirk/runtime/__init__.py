"""Running pipelines: the epoch loop, the commit protocol, recovery, fault points."""

from __future__ import annotations

from falkirk.execution.report import RunReport
from falkirk.runtime.engine import Engine

__all__ = ["Engine", "RunReport"]
