"""Running pipelines: the epoch loop, the commit protocol, recovery, fault points."""

from __future__ import annotations

from falkirk.execution.report import RunReport
from falkirk.runtime.engine import Engine
from falkirk.runtime.exits import exit_code, failed
from falkirk.runtime.stopping import RunAbandoned

__all__ = ["Engine", "RunAbandoned", "RunReport", "exit_code", "failed"]
