"""Running pipelines: the epoch loop, the commit protocol, recovery, fault points."""

from __future__ import annotations

from falkirk.runtime.engine import Engine
from falkirk.runtime.report import RunReport

__all__ = ["Engine", "RunReport"]
