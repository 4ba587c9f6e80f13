"""Falkirk: a fault-tolerant streaming dataflow engine for PySpark.

The pure core lives in :mod:`falkirk.time` (logical times, frontiers, projections)
and :mod:`falkirk.recovery` (checkpoint metadata, the consistent-rollback solver
and the monitor). Neither imports pyspark.
"""

from __future__ import annotations

from falkirk.exceptions import FalkirkError

__all__ = ["FalkirkError", "__version__"]
__version__ = "0.1.0"
