"""Recovery: checkpoint metadata, the consistent-rollback solver and the monitor.

Pure Python (no pyspark). The concepts are those of the Falkirk Wheel paper:

* :class:`CheckpointMeta` - Ξ(p, f), what is known about one rollback point;
* :func:`solve` - Figure 6: the greatest globally consistent rollback, as a
  :class:`RollbackPlan` (frontiers, notification frontiers, re-sends, explanations);
* :class:`Monitor` - section 4.2-4.4: low-watermarks from persisted metadata and the
  garbage-collection / acknowledgement decisions that follow from them.
"""

from __future__ import annotations

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.codec import checkpoint_from_json, checkpoint_to_json
from falkirk.recovery.constraints import violations
from falkirk.recovery.exceptions import (
    CheckpointError,
    RecoveryError,
    ScenarioError,
    TopologyError,
)
from falkirk.recovery.monitor import Decision, DecisionKind, Monitor
from falkirk.recovery.plan import Bound, Explanation, RollbackPlan
from falkirk.recovery.scenario import Scenario, load_scenario, parse_scenario
from falkirk.recovery.solver import SolverError, solve
from falkirk.recovery.topology import Edge, Topology

__all__ = [
    "Bound",
    "CheckpointError",
    "CheckpointMeta",
    "Decision",
    "DecisionKind",
    "Edge",
    "Explanation",
    "Monitor",
    "RecoveryError",
    "RollbackPlan",
    "Scenario",
    "ScenarioError",
    "SolverError",
    "Topology",
    "TopologyError",
    "checkpoint_from_json",
    "checkpoint_to_json",
    "load_scenario",
    "parse_scenario",
    "solve",
    "violations",
]
