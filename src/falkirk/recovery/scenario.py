"""Reading rollback scenarios (docs/scenarios.md) into a topology and F*(p).

A scenario is a JSON document: ``processors`` with their time domains, ``edges``
with their projections, and ``checkpoints`` listing F*(p) with the metadata of each.
Errors name the processor, checkpoint and field at fault.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.exceptions import RecoveryError, ScenarioError
from falkirk.recovery.topology import Topology
from falkirk.time import Domain, Frontier, TimeError, domain_from_json, frontier_from_json

T = TypeVar("T")
logger = logging.getLogger(__name__)

_CHECKPOINT_KEYS = {"frontier", "notifications", "delivered", "discarded", "projected", "logged"}


@dataclass(frozen=True, eq=False)
class Scenario:
    """A parsed scenario: the topology and the available checkpoints F*(p)."""

    topology: Topology
    available: Mapping[str, tuple[CheckpointMeta, ...]]


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse a scenario file; raises :class:`ScenarioError` with the file name."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON: {exc}") from exc
    try:
        return parse_scenario(document)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from exc


def parse_scenario(document: object) -> Scenario:
    """Parse a scenario document (already decoded from JSON)."""
    doc = _object(document, "the scenario")
    _only(doc, {"processors", "edges", "checkpoints"}, "the scenario")
    processors = _object(doc.get("processors"), "'processors'")
    domains: dict[str, Domain] = {}
    for name, spec in processors.items():
        spec = _object(spec, f"processor {name!r}")
        _only(spec, {"domain"}, f"processor {name!r}")
        domains[name] = _wrap(partial(domain_from_json, spec.get("domain", "epoch")), f"processor {name!r}")
    edge_specs = []
    for name, spec in _object(doc.get("edges", {}), "'edges'").items():
        spec = _object(spec, f"edge {name!r}")
        _only(spec, {"src", "dst", "projection"}, f"edge {name!r}")
        if not isinstance(spec.get("src"), str) or not isinstance(spec.get("dst"), str):
            raise ScenarioError(
                f"edge {name!r}: needs 'src' and 'dst' naming processors, got {spec!r}"
            )
        edge_specs.append((name, spec["src"], spec["dst"], spec.get("projection", "identity")))
    topology = _wrap(lambda: Topology.build(domains, edge_specs), "edges")
    available: dict[str, tuple[CheckpointMeta, ...]] = {}
    for p, entries in _object(doc.get("checkpoints", {}), "'checkpoints'").items():
        if p not in domains:
            raise ScenarioError(
                f"checkpoints listed for unknown processor {p!r}; processors: {sorted(domains)}"
            )
        if not isinstance(entries, list):
            raise ScenarioError(f"checkpoints of {p!r}: expected a list, got {entries!r}")
        available[p] = tuple(_checkpoint(topology, p, k, e) for k, e in enumerate(entries))
        for k, meta in enumerate(available[p][:-1]):
            if meta.frontier.is_top:
                raise ScenarioError(
                    f"checkpoint #{k} of processor {p!r}: \"top\" (the current state of a "
                    "processor that has not failed) must be listed last"
                )
    return Scenario(topology, available)


def _checkpoint(topology: Topology, p: str, k: int, entry: object) -> CheckpointMeta:
    where = f"checkpoint #{k} of processor {p!r}"
    spec = _object(entry, where)
    _only(spec, _CHECKPOINT_KEYS, where)
    if "frontier" not in spec:
        raise ScenarioError(f"{where}: 'frontier' is required")
    domain = topology.domains[p]

    def own(value: object, field: str) -> Frontier:
        return _wrap(lambda: frontier_from_json(domain, value), f"{where}: {field}")

    def per_edge(field: str, inputs: bool) -> dict[str, Any] | None:
        if field not in spec:
            return None
        values = _object(spec[field], f"{where}: {field}")
        edges = topology.inputs(p) if inputs else topology.outputs(p)
        by_name = {e.name: e for e in edges}
        out: dict[str, Any] = {}
        for edge, value in values.items():
            if inputs and edge not in topology.edges:
                # An external input (a source's feed): checked, but no sender constrains it.
                _wrap(partial(frontier_from_json, domain, value), f"{where}: {field}[{edge!r}]")
                continue
            if edge not in by_name:
                side = "input" if inputs else "output"
                raise ScenarioError(
                    f"{where}: {field} names {edge!r}, which is not an {side} edge of {p!r} "
                    f"({side} edges: {sorted(by_name)})"
                )
            target = domain if inputs else topology.domains[by_name[edge].dst]
            if field == "logged":
                if not isinstance(value, list):
                    raise ScenarioError(f"{where}: logged[{edge!r}] must be a list of times")
                out[edge] = [_wrap(partial(target.check, v), f"{where}: logged[{edge!r}]") for v in value]
            else:
                out[edge] = _wrap(
                    partial(frontier_from_json, target, value), f"{where}: {field}[{edge!r}]"
                )
        return out

    frontier = own(spec["frontier"], "frontier")
    projected = per_edge("projected", inputs=False) or {}
    discarded = per_edge("discarded", inputs=False) or {}
    for edge in topology.outputs(p):
        if edge.name in discarded:
            continue
        # The format's default is D̄ = φ literally (docs/scenarios.md), also where a
        # recorded edge stores no value and φ is therefore ∅ (⊤ at ⊤).
        value = projected.get(edge.name)
        if value is None:
            value = edge.projection(frontier)
            if edge.projection.recorded and not frontier.is_empty and not frontier.is_top:
                logger.warning(
                    "scenario %s: recorded edge %r has neither 'projected' nor 'discarded'; "
                    "the format's default D̄ = φ = ∅ says nothing sent on it was discarded. "
                    "Give 'discarded' if messages on %r were not logged.",
                    where,
                    edge.name,
                    edge.name,
                )
        discarded[edge.name] = value
    return _wrap(
        lambda: CheckpointMeta.build(
            topology,
            p,
            frontier,
            notifications=own(spec["notifications"], "notifications") if "notifications" in spec else None,
            delivered=per_edge("delivered", inputs=True),
            projected=projected,
            discarded=discarded,
            logged=per_edge("logged", inputs=False),
        ),
        where,
    )


def _wrap(make: Callable[[], T], where: str) -> T:
    try:
        return make()
    except ScenarioError:
        raise
    except (TimeError, RecoveryError) as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{what}: expected a JSON object, got {value!r}")
    return value


def _only(spec: Mapping[str, object], allowed: set[str], what: str) -> None:
    # Unknown keys are reported, not refused: annotations such as a "description"
    # are common, and every field that matters has a safe default.
    unknown = sorted(set(spec) - allowed)
    if unknown:
        logger.warning(
            "scenario %s: ignoring unknown keys %s (known keys: %s)", what, unknown, sorted(allowed)
        )


def dumps_plan(plan_json: Mapping[str, Any]) -> str:
    """JSON text of a plan; an unbounded coordinate is written ``Infinity``."""
    return json.dumps(plan_json, sort_keys=False)
