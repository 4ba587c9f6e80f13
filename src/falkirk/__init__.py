"""Falkirk: a fault-tolerant streaming dataflow engine for PySpark.

The pure core lives in :mod:`falkirk.time` (logical times, frontiers, projections)
and :mod:`falkirk.recovery` (checkpoint metadata, the consistent-rollback solver
and the monitor). Neither imports pyspark.
"""

from __future__ import annotations

from falkirk.exceptions import FalkirkError

__all__ = ["FalkirkError", "__version__", "read_state"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``falkirk.read_state`` (:mod:`falkirk.ops.state_table`), imported when first
    used: ``import falkirk`` alone loads no PySpark."""
    if name == "read_state":
        from falkirk.ops.state_table import read_state

        return read_state
    raise AttributeError(f"module 'falkirk' has no attribute {name!r}")
