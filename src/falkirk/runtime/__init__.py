"""Running pipelines: the epoch loop, the commit protocol, recovery, fault points."""

from __future__ import annotations

from falkirk.execution.report import RunReport
from falkirk.runtime.engine import Engine
from falkirk.runtime.stopping import RunAbandoned, exit_code

__all__ = ["Engine", "RunAbandoned", "RunReport", "exit_code"]
