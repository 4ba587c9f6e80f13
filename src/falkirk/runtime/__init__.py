"""Running pipelines: the epoch loop, the commit protocol, recovery, fault points."""

from __future__ import annotations

from falkirk.runtime.engine import Engine, RunReport

__all__ = ["Engine", "RunReport"]
