"""A pipeline described as JSON, recorded in its storage root at every start.

Tools that see only a storage root (``falkirk status``, ``falkirk inspect``, the
dashboard) read this description instead of the pipeline's code: which processors
there are, what each does, its fault-tolerance policy, its inputs, and the topology
the recovery solver works on (in the scenario format of ``docs/scenarios.md``, so
that :func:`falkirk.recovery.scenario.parse_scenario` rebuilds it).
"""

from __future__ import annotations

from typing import Any

from falkirk.graph import Pipeline
from falkirk.graph.specs import SinkSpec
from falkirk.recovery import Topology
from falkirk.time.codec import domain_to_json

#: Version of the description's layout.
FORMAT = 1


def describe(pipeline: Pipeline, identity: str | None, topology: Topology) -> dict[str, Any]:
    """The description of ``pipeline`` (run under ``identity``, its storage root's,
    see :mod:`falkirk.storage.identity`; None until the engine holds the root)."""
    processors: dict[str, dict[str, Any]] = {}
    for p in pipeline.processors.values():
        spec = p.spec
        processors[p.name] = {
            "kind": p.kind,
            "policy": p.policy.name,
            "policy_detail": repr(p.policy),
            "inputs": [i.key for i in p.inputs],
            "stateful": p.stateful,
            "source": bool(spec.source),
            "sink": bool(spec.sink),
        }
        if isinstance(spec, SinkSpec):
            processors[p.name]["target"] = target(spec.writer)
    checkpoints = pipeline.checkpoints
    return {
        "format": FORMAT,
        "pipeline": pipeline.name,
        "identity": identity,
        "global_checkpoints": None
        if checkpoints is None
        else {"every": checkpoints.every, "seconds": checkpoints.seconds},
        "processors": processors,
        "loops": {
            name: {"max_iterations": loop.max_iterations, "on_limit": loop.on_limit, "interleave": loop.interleave}
            for name, loop in pipeline.loops.items()
        },
        "topology": {
            "processors": {p: {"domain": domain_to_json(d)} for p, d in topology.domains.items()},
            "edges": {
                name: {"src": e.src, "dst": e.dst, "projection": e.projection.kind}
                for name, e in topology.edges.items()
            },
        },
    }


def target(writer: object) -> dict[str, Any]:
    """Where a sink writes, as its ``describe()`` says (no secrets): e.g.
    ``{"kind": "parquet", "path": ...}`` or ``{"kind": "postgresql", "dsn": ...}``."""
    described = getattr(writer, "describe", None)
    if callable(described):
        return dict(described())
    return {"kind": type(writer).__name__}
