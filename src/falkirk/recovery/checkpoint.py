"""Checkpoint metadata Ξ(p, f): what the solver must know about one rollback point.

For every frontier f a processor p can roll back to (f ∈ F*(p)), the paper's Table 1
lists what must be available. The solver needs only the *metadata*, not the state
itself (section 4.2):

=====================  ===========================  =====================================
field                  paper                        meaning
=====================  ===========================  =====================================
``frontier``           f                            the times whose effects the state holds
``notifications``      N̄(p, f)                      smallest frontier holding the
                                                    notifications p processed in f
``delivered[d]``       M̄(d, f)                      ... holding the messages delivered on
                                                    input edge d (p's domain)
``projected[e]``       φ(e)(f)                      times fixed on output edge e
                                                    (receiver's domain)
``discarded[e]``       D̄(e, f)                      ... holding the messages sent on e and
                                                    *not* logged (receiver's domain)
``logged[e]``          times of L(e, f)             messages sent on e and logged
=====================  ===========================  =====================================

Fields not stored take the paper's safe (conservative) defaults, see
:meth:`CheckpointMeta.build`. ⊤ is a valid frontier for the metadata of a processor
that has not failed: its current, in-memory state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from falkirk.recovery.exceptions import CheckpointError
from falkirk.recovery.topology import Topology
from falkirk.time import Domain, Frontier, SeqDomain, Time, TimeError


@dataclass(frozen=True, eq=False)
class CheckpointMeta:
    """Ξ(p, f) with every field resolved for every edge of p (see module docstring).

    Build with :meth:`build` (fills defaults, validates) or :meth:`initial` (∅)."""

    processor: str
    frontier: Frontier
    notifications: Frontier
    delivered: Mapping[str, Frontier]
    projected: Mapping[str, Frontier]
    discarded: Mapping[str, Frontier]
    logged: Mapping[str, tuple[Time, ...]]
    #: Output edges whose ``projected`` value was given explicitly and differs from
    #: the edge's projection function (a recorded edge never counts). Such values
    #: can make φ non-monotone; the solver then checks its answer exhaustively.
    overridden: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls,
        topology: Topology,
        processor: str,
        frontier: Frontier,
        *,
        notifications: Frontier | None = None,
        delivered: Mapping[str, Frontier] | None = None,
        projected: Mapping[str, Frontier] | None = None,
        discarded: Mapping[str, Frontier] | None = None,
        logged: Mapping[str, Iterable[Time]] | None = None,
    ) -> CheckpointMeta:
        """Ξ(p, f) with the paper's safe defaults for what is not given (section 3.4):

        * ``notifications`` = f (∅ in a sequence-number domain, which has none);
        * ``delivered[d]`` = f (in a sequence-number domain: f's part on edge d);
        * ``projected[e]`` = φ(e)(f) (for a recorded projection ∅, the safe default,
          except at f = ⊤: a processor that has not failed keeps everything it sent,
          so every projection maps ⊤ to ⊤);
        * ``discarded[e]`` = ``projected[e]`` (nothing logged, everything discarded);
          for a recorded edge without a stored ``projected`` value that would claim
          nothing was discarded, so the default is ⊤ (anything may be missing);
        * ``logged[e]`` = no messages.

        Raises :class:`CheckpointError` naming the processor and field when an edge is
        not an input/output of p or a frontier is in the wrong domain.
        """
        domain = topology.require(processor)
        where = f"checkpoint {frontier!r} of processor {processor!r}"
        _same(frontier, domain, f"{where}: frontier")
        ins = {e.name: e for e in topology.inputs(processor)}
        outs = {e.name: e for e in topology.outputs(processor)}
        _edges_known(delivered, ins, f"{where}: delivered", "input")
        for name, given in (("projected", projected), ("discarded", discarded), ("logged", logged)):
            _edges_known(given, outs, f"{where}: {name}", "output")

        if notifications is None:
            notifications = Frontier.empty(domain) if isinstance(domain, SeqDomain) else frontier
        _same(notifications, domain, f"{where}: notifications")

        resolved_delivered: dict[str, Frontier] = {}
        for name in ins:
            value = (delivered or {}).get(name)
            if value is None:
                value = _part_on(frontier, name) if isinstance(domain, SeqDomain) else frontier
            _same(value, domain, f"{where}: delivered[{name!r}]")
            resolved_delivered[name] = value

        resolved_projected: dict[str, Frontier] = {}
        resolved_discarded: dict[str, Frontier] = {}
        resolved_logged: dict[str, tuple[Time, ...]] = {}
        overridden: set[str] = set()
        for name, edge in outs.items():
            target = topology.domains[edge.dst]
            proj = (projected or {}).get(name)
            unknown = proj is None and edge.projection.recorded and not frontier.is_top
            if proj is None:
                proj = edge.projection(frontier)
            _same(proj, target, f"{where}: projected[{name!r}]")
            if not edge.projection.recorded and proj != edge.projection(frontier):
                overridden.add(name)
            default = Frontier.top(target) if unknown and not frontier.is_empty else proj
            disc = (discarded or {}).get(name, default)
            _same(disc, target, f"{where}: discarded[{name!r}]")
            resolved_projected[name] = proj
            resolved_discarded[name] = disc
            resolved_logged[name] = _times(target, (logged or {}).get(name, ()), f"{where}: logged[{name!r}]")
        return cls(
            processor,
            frontier,
            notifications,
            resolved_delivered,
            resolved_projected,
            resolved_discarded,
            resolved_logged,
            frozenset(overridden),
        )

    @classmethod
    def initial(cls, topology: Topology, processor: str) -> CheckpointMeta:
        """Ξ(p, ∅): the initial state, always available; nothing delivered, sent or logged."""
        domain = topology.require(processor)
        empty = Frontier.empty(domain)
        outs = topology.outputs(processor)
        return cls(
            processor,
            empty,
            empty,
            {e.name: empty for e in topology.inputs(processor)},
            {e.name: Frontier.empty(topology.domains[e.dst]) for e in outs},
            {e.name: Frontier.empty(topology.domains[e.dst]) for e in outs},
            {e.name: () for e in outs},
        )

    @classmethod
    def current(cls, topology: Topology, processor: str) -> CheckpointMeta:
        """Ξ(p, ⊤) with safe defaults: the live state of a processor that has not
        failed and logs nothing (section 4.4)."""
        return cls.build(topology, processor, Frontier.top(topology.require(processor)))

    def __repr__(self) -> str:
        return f"Ξ({self.processor}, {self.frontier!r})"


def _same(f: Frontier, domain: Domain, what: str) -> None:
    if not isinstance(f, Frontier):
        raise CheckpointError(f"{what}: expected a Frontier, got {f!r}")
    if f.domain != domain:
        raise CheckpointError(f"{what}: {f!r} is in {f.domain!r}, expected {domain!r}")


def _edges_known(given: Mapping[str, object] | None, known: Mapping[str, object], what: str, side: str) -> None:
    unknown = sorted(set(given or {}) - set(known))
    if unknown:
        raise CheckpointError(
            f"{what}: {unknown} are not {side} edges of the processor; its {side} edges are "
            f"{sorted(known)}"
        )


def _part_on(frontier: Frontier, edge: str) -> Frontier:
    """A sequence-number frontier restricted to the times on ``edge``."""
    if frontier.maxima is None:
        return Frontier.down(frontier.domain, [[edge, float("inf")]])
    return Frontier(frontier.domain, tuple(t for t in frontier.maxima if t[0] == edge))  # type: ignore[index]


def _times(domain: Domain, times: Iterable[Time], what: str) -> tuple[Time, ...]:
    try:
        checked = {domain.check(list(t) if isinstance(t, tuple) else t) for t in times}
    except TimeError as exc:
        raise CheckpointError(f"{what}: {exc}") from exc
    for t in checked:
        coords: tuple[Any, ...] = t if isinstance(t, tuple) else (t,)
        if isinstance(domain, SeqDomain):
            coords = coords[1:]
        if any(c == float("inf") for c in coords):
            raise CheckpointError(f"{what}: a message has a finite time, got {t!r}")
    return tuple(sorted(checked, key=domain.sort_key))
