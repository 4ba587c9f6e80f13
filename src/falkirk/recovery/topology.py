"""The shape of a dataflow as recovery sees it: processors, their time domains, and
edges with their projections φ(e).

This is deliberately smaller than the user-facing graph description: the solver and
the monitor need only who sends to whom, in which time domain, and how frontiers
cross each edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from falkirk.recovery.exceptions import TopologyError
from falkirk.time import Domain, Projection, TimeError, projection_for


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed edge ``src -> dst`` named ``name`` carrying ``projection``."""

    name: str
    src: str
    dst: str
    projection: Projection


@dataclass(frozen=True, eq=False)
class Topology:
    """Processors (name -> time domain) and edges (name -> :class:`Edge`).

    Validated on construction: every edge names known processors and its projection
    goes from the sender's domain to the receiver's. Cycles and self-loops are allowed.
    """

    domains: Mapping[str, Domain]
    edges: Mapping[str, Edge]
    _inputs: dict[str, tuple[Edge, ...]] = field(init=False, repr=False)
    _outputs: dict[str, tuple[Edge, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        inputs: dict[str, list[Edge]] = {p: [] for p in self.domains}
        outputs: dict[str, list[Edge]] = {p: [] for p in self.domains}
        for name, edge in self.edges.items():
            if name != edge.name:
                raise TopologyError(f"edge registered as {name!r} is named {edge.name!r}")
            for end, proc in (("src", edge.src), ("dst", edge.dst)):
                if proc not in self.domains:
                    raise TopologyError(
                        f"edge {name!r}: {end} {proc!r} is not a processor; known processors: "
                        f"{sorted(self.domains)}"
                    )
            proj = edge.projection
            if proj.source != self.domains[edge.src] or proj.target != self.domains[edge.dst]:
                raise TopologyError(
                    f"edge {name!r} ({edge.src} -> {edge.dst}): its {proj.kind} projection maps "
                    f"{proj.source!r} -> {proj.target!r} but the processors' domains are "
                    f"{self.domains[edge.src]!r} -> {self.domains[edge.dst]!r}"
                )
            outputs[edge.src].append(edge)
            inputs[edge.dst].append(edge)
        object.__setattr__(self, "_inputs", {p: tuple(es) for p, es in inputs.items()})
        object.__setattr__(self, "_outputs", {p: tuple(es) for p, es in outputs.items()})

    @classmethod
    def build(
        cls,
        domains: Mapping[str, Domain],
        edges: Iterable[tuple[str, str, str, str | Projection]],
    ) -> Topology:
        """Build from ``(name, src, dst, projection)`` tuples, where the projection may
        be a kind name (``"identity"``, ``"loop_entry"``, ...) or a :class:`Projection`."""
        built: dict[str, Edge] = {}
        for name, src, dst, proj in edges:
            if name in built:
                raise TopologyError(f"edge {name!r} is defined twice")
            for end, proc in (("src", src), ("dst", dst)):
                if proc not in domains:
                    raise TopologyError(
                        f"edge {name!r}: {end} {proc!r} is not a processor; known processors: "
                        f"{sorted(domains)}"
                    )
            if isinstance(proj, str):
                try:
                    proj = projection_for(proj, domains[src], domains[dst])
                except TimeError as exc:
                    raise TopologyError(f"edge {name!r} ({src} -> {dst}): {exc}") from exc
            built[name] = Edge(name, src, dst, proj)
        return cls(dict(domains), built)

    @property
    def processors(self) -> tuple[str, ...]:
        return tuple(self.domains)

    def inputs(self, processor: str) -> tuple[Edge, ...]:
        """In_e(p): the edges into ``processor``."""
        return self._inputs[processor]

    def outputs(self, processor: str) -> tuple[Edge, ...]:
        """Out_e(p): the edges out of ``processor``."""
        return self._outputs[processor]

    def require(self, processor: str) -> Domain:
        """The domain of ``processor``; raises :class:`TopologyError` if unknown."""
        try:
            return self.domains[processor]
        except KeyError:
            raise TopologyError(
                f"unknown processor {processor!r}; known processors: {sorted(self.domains)}"
            ) from None
