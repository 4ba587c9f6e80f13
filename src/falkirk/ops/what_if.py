"""What a failure would roll back now, read from a storage root's committed metadata
(``examples/figure1.py --explain`` prints it for each of its regimes).

:func:`what_if` gives the solver's plan (``falkirk solve``'s algorithm) for some
processors failing after the last committed epoch while every other one survives
with its live state, Ξ(p, ⊤), as after an executor loss; with every processor
failed, the plan of a restart. It only reads: ``storage`` is a local root that no
running pipeline uses.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from falkirk.control import xi
from falkirk.control.domains import tick, topology
from falkirk.graph import Pipeline
from falkirk.recovery import RollbackPlan, solve
from falkirk.storage import MetaStore


@dataclass(frozen=True)
class WhatIf:
    """The answer of :func:`what_if`."""

    epoch: int  # the last committed epoch (0: none yet)
    plan: RollbackPlan  # frontiers (⊤: keeps its live state), reasons, re-sent logs
    redo: dict[str, int]  # for each processor that rolls back: how many committed epochs it re-does


def what_if(pipeline: Pipeline, storage: str | Path, failed: Collection[str]) -> WhatIf:
    """The rollback if the processors ``failed`` failed now and the others kept their
    live state (see the module docstring)."""
    topo = topology(pipeline)
    meta = MetaStore(Path(storage), read_only=True)
    try:
        stored = meta.checkpoints(topo)
        epoch = meta.committed_epoch() or 0
        kept = {key: set(meta.log_epochs(key)) for p in pipeline.processors.values() for key in (f"{p.name}.{q}" for q in p.ports)}
    finally:
        meta.close()
    procs = pipeline.processors
    available = {
        p: [s.meta for s in stored.get(p, [])]
        + ([] if p in failed else [xi.live(topo, procs[p], epoch, lambda k: kept.get(k, set()))])
        for p in topo.processors
    }
    plan = solve(topo, available)
    redo = {name: epoch - tick(f).epochs_done for name, f in plan.frontiers.items() if not f.is_top}
    return WhatIf(epoch, plan, redo)
