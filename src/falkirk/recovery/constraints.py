"""The consistency constraints of section 3.5, checked directly on a rollback.

A rollback assigns every processor p a checkpoint f(p) ∈ F*(p) and a notification
frontier f_n(p). It is consistent when, for every processor p:

1. D̄(e, f(p)) ⊆ f(dst(e))             for every output edge e (nothing discarded is needed);
2. M̄(d, f(p)) ⊆ φ(d)(f(src(d)))        for every input edge d (nothing delivered is undone);
3. f_n(p) ⊆ f(p);
4. N̄(p, f(p)) ⊆ f_n(p);
5. f_n(p) ⊆ φ(d)(f_n(src(d)))          for every input edge d.

This module is independent of the solver's search so that it can check it: the
solver runs :func:`violations` on its own answer before returning it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.topology import Edge, Topology
from falkirk.time import Frontier


def project(
    edge: Edge,
    frontier: Frontier,
    available: Sequence[CheckpointMeta],
) -> Frontier:
    """φ(edge)(frontier) for a frontier of the sender, using stored values.

    If ``frontier`` is one of the sender's available checkpoints, its stored
    ``projected`` value is used. Otherwise a recorded projection takes the value of
    the greatest available checkpoint contained in ``frontier`` (∅ if none, the
    projection being monotone; the union over the maximal ones if F*(src) is not a
    chain), and the other kinds apply their function.
    ``available`` must include Ξ(src, ∅).
    """
    contained: list[CheckpointMeta] = []
    for meta in available:
        if meta.frontier == frontier:
            return meta.projected[edge.name]
        if edge.projection.recorded and meta.frontier <= frontier:
            contained.append(meta)
    if edge.projection.recorded:
        # Each contained checkpoint's value is safe, so their union is too; along a
        # chain this is simply the value of the greatest one.
        result = Frontier.empty(edge.projection.target)
        for meta in contained:
            if not any(meta.frontier < other.frontier for other in contained):
                result = result | meta.projected[edge.name]
        return result
    return edge.projection(frontier)


def violations(
    topology: Topology,
    available: Mapping[str, Sequence[CheckpointMeta]],
    chosen: Mapping[str, CheckpointMeta],
    notification_frontiers: Mapping[str, Frontier],
) -> list[str]:
    """Every violated constraint of the rollback, in words (empty when consistent).

    ``available[p]`` is F*(p) including Ξ(p, ∅); ``chosen[p]`` must be one of them."""
    problems: list[str] = []
    for p in topology.processors:
        c = chosen[p]
        fn = notification_frontiers[p]
        if not any(m is c or m.frontier == c.frontier for m in available[p]):
            problems.append(f"{p}: chosen {c!r} is not an available checkpoint")
        for e in topology.outputs(p):
            if not c.discarded[e.name] <= chosen[e.dst].frontier:
                problems.append(
                    f"(1) {p}: D̄({e.name}, {c.frontier!r}) = {c.discarded[e.name]!r} ⊄ "
                    f"f({e.dst}) = {chosen[e.dst].frontier!r}"
                )
        for d in topology.inputs(p):
            fixed = chosen[d.src].projected[d.name]
            if not c.delivered[d.name] <= fixed:
                problems.append(
                    f"(2) {p}: M̄({d.name}, {c.frontier!r}) = {c.delivered[d.name]!r} ⊄ "
                    f"φ({d.name})(f({d.src})) = {fixed!r}"
                )
            upstream = project(d, notification_frontiers[d.src], available[d.src])
            if not fn <= upstream:
                problems.append(
                    f"(5) {p}: f_n = {fn!r} ⊄ φ({d.name})(f_n({d.src})) = {upstream!r}"
                )
        if not fn <= c.frontier:
            problems.append(f"(3) {p}: f_n = {fn!r} ⊄ f = {c.frontier!r}")
        if not c.notifications <= fn:
            problems.append(f"(4) {p}: N̄ = {c.notifications!r} ⊄ f_n = {fn!r}")
    return problems
