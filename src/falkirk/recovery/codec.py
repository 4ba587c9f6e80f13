"""Ξ(p, f) as JSON: how checkpoint metadata is persisted (never pickled).

The document holds every resolved field (see :class:`CheckpointMeta`) with frontiers
and times in the scenario format of docs/scenarios.md, plus a format version.
:func:`checkpoint_from_json` validates everything against the topology, so a
corrupted or foreign record raises :class:`CheckpointError` instead of being trusted.
"""

from __future__ import annotations

from typing import Any

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.exceptions import CheckpointError, TopologyError
from falkirk.recovery.topology import Topology
from falkirk.time import TimeError, frontier_from_json, frontier_to_json
from falkirk.time.codec import time_to_json

FORMAT = 1


def checkpoint_to_json(meta: CheckpointMeta) -> dict[str, Any]:
    """A JSON-ready document of every field of ``meta``."""
    return {
        "format": FORMAT,
        "processor": meta.processor,
        "frontier": frontier_to_json(meta.frontier),
        "notifications": frontier_to_json(meta.notifications),
        "delivered": {e: frontier_to_json(f) for e, f in meta.delivered.items()},
        "projected": {e: frontier_to_json(f) for e, f in meta.projected.items()},
        "discarded": {e: frontier_to_json(f) for e, f in meta.discarded.items()},
        "logged": {e: [time_to_json(t) for t in ts] for e, ts in meta.logged.items()},
    }


def checkpoint_from_json(topology: Topology, doc: object) -> CheckpointMeta:
    """Rebuild Ξ(p, f) from :func:`checkpoint_to_json` output, validating it."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(
            f"not a Falkirk checkpoint record of format {FORMAT}: {str(doc)[:200]!r}"
        )
    try:
        p = doc["processor"]
        domain = topology.require(p)
        own = {
            e.name: domain for e in topology.inputs(p)
        }
        out = {e.name: topology.domains[e.dst] for e in topology.outputs(p)}
        for field, edges in (("delivered", own), ("projected", out), ("discarded", out), ("logged", out)):
            if set(doc[field]) != set(edges):
                raise CheckpointError(
                    f"checkpoint record of {p!r}: {field} covers edges {sorted(doc[field])}, the "
                    f"topology has {sorted(edges)}; was the pipeline changed since it was written?"
                )
        return CheckpointMeta.build(
            topology,
            p,
            frontier_from_json(domain, doc["frontier"]),
            notifications=frontier_from_json(domain, doc["notifications"]),
            delivered={e: frontier_from_json(domain, v) for e, v in doc["delivered"].items()},
            projected={e: frontier_from_json(out[e], v) for e, v in doc["projected"].items()},
            discarded={e: frontier_from_json(out[e], v) for e, v in doc["discarded"].items()},
            logged={e: [out[e].check(t) for t in v] for e, v in doc["logged"].items()},
        )
    except (KeyError, TypeError, AttributeError, TimeError, TopologyError) as exc:
        raise CheckpointError(f"malformed checkpoint record {str(doc)[:200]!r}: {exc!r}") from exc
