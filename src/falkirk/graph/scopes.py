"""Where a processor runs: in the epochs, in a loop (:mod:`falkirk.graph.loops`) or in a
sequence-number region (:mod:`falkirk.graph.sequences`), checked against what it reads
and what it is, with errors that say how to fix the graph."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from falkirk.graph.exceptions import GraphError
from falkirk.graph.policies import EagerCheckpoint, LazyCheckpoint, Policy, Stateless
from falkirk.graph.specs import SEQUENCE_POLICIES, OperatorSpec, Structure


def check_sequence_policy(name: str, spec: OperatorSpec, sequence: str, policy: Policy | None) -> None:
    """Raise unless ``policy`` may be used by processor ``name`` in region ``sequence``."""
    if not isinstance(policy or Stateless(), SEQUENCE_POLICIES):
        allowed = ", ".join(t.__name__ for t in SEQUENCE_POLICIES)
        raise GraphError(f"processor {name!r} is in region {sequence!r}, where it can use {allowed}, not {policy.name}")  # type: ignore[union-attr]
    if spec.keyed and not isinstance(policy, EagerCheckpoint):
        raise GraphError(
            f"processor {name!r} keeps keyed state in sequence-number region {sequence!r}, which persists "
            "every update before its input is acknowledged: give it policy=EagerCheckpoint()"
        )


def out_scope(spec: OperatorSpec, region: str | None) -> str | None:
    """The loop or region of the rows a processor of ``spec`` in ``region`` sends (a
    translator's differ from its own)."""
    if spec.structure is Structure.REGION_NUMBER:
        return spec.translates
    if spec.structure is Structure.REGION_REGROUP:
        return None
    return region


def scope_of(name: str, spec: OperatorSpec, scopes: set[str | None], loops: Collection[str], sequences: Collection[str]) -> str | None:
    """The loop or region processor ``name`` runs in (None: epochs), checked against
    ``scopes``, those of the rows it reads."""
    structure, translated = spec.structure, spec.translates
    if structure in (Structure.REGION_NUMBER, Structure.REGION_REGROUP):
        if translated not in sequences:
            raise GraphError(f"processor {name!r}: no region named {translated!r}; make it with Pipeline.sequenced")
        reads = None if structure is Structure.REGION_NUMBER else translated
        if scopes != {reads}:
            where = f"region {reads!r}" if reads else "the epochs outside any loop or region"
            raise GraphError(f"processor {name!r} ({spec.kind}) must read a stream of {where}")
        return reads
    if structure in (Structure.LOOP_ENTER, Structure.LOOP_FEEDBACK, Structure.LOOP_LEAVE):
        if translated not in loops:
            raise GraphError(f"processor {name!r}: no loop named {translated!r}; make it with Pipeline.iterate")
        outside = None if structure is Structure.LOOP_LEAVE else translated
        inside = translated if structure is Structure.LOOP_LEAVE else None
        if structure is not Structure.LOOP_FEEDBACK and scopes != {inside}:
            where = f"loop {inside!r}" if inside else "the epochs outside any loop (loops do not nest yet)"
            raise GraphError(f"processor {name!r} ({spec.kind}) must read a stream of {where}")
        return outside
    if len(scopes) > 1:
        raise GraphError(
            f"processor {name!r} reads streams of different scopes ({sorted(map(str, scopes))}); bring "
            "a stream into a loop with loop.enter and out of it with loop.leave"
        )
    loop = next(iter(scopes), None)
    if loop in sequences:
        if not spec.fits_regions:
            raise GraphError(
                f"processor {name!r} ({spec.kind}) cannot be inside sequence-number region {loop!r}; take "
                "its stream out with region.leave first"
            )
        if spec.notifies:
            raise GraphError(
                f"processor {name!r} is in sequence-number region {loop!r}, where no notifications exist (each "
                "record is its own time); drop on_epoch_end or move it after region.leave"
            )
        return loop
    if loop is not None and spec.ages_by_epochs:
        raise GraphError(
            f"processor {name!r} ({spec.kind}) cannot be inside loop {loop!r} yet (its state ages by "
            "epochs); use stateful, aggregate or a buffer without retain, or join outside the loop"
        )
    if loop is not None and (spec.source or spec.sink):
        raise GraphError(f"processor {name!r} ({spec.kind}) cannot be inside loop {loop!r}; take its stream out with loop.leave")
    return loop


def check_interleaved(loop: str, processors: Sequence[Any]) -> None:
    """Raise unless loop ``loop`` may run its epochs interleaved (see
    :mod:`falkirk.graph.loops`): its keyed processors keep state partitioned by time,
    its processors persist at epoch ends only, and nothing upstream of it is in a
    region. ``processors``: the pipeline's :class:`~falkirk.graph.Processor` objects."""
    members = [p for p in processors if p.loop == loop]
    for p in members:
        if p.spec.keyed and not p.spec.selective:
            raise GraphError(
                f"loop {loop!r} interleaves epochs, but processor {p.name!r} ({p.kind}) keeps state that is not "
                "partitioned by time: a later epoch's iteration would change what an earlier one reads "
                "(section 3.3). Build the loop without interleave=True, or keep that state in a buffer"
            )
        if not isinstance(p.policy, (Stateless, LazyCheckpoint)):
            raise GraphError(
                f"loop {loop!r} interleaves epochs, which commits what its processors persist when an epoch's "
                f"iterations are over; processor {p.name!r} has policy {p.policy.name}, which persists every "
                "iteration. Use LazyCheckpoint(every=1) (a checkpoint at every epoch's end) or Stateless, or "
                "build the loop without interleave=True"
            )
    by_name = {p.name: p for p in processors}
    seen: set[str] = set()
    todo = [i.src for p in members for i in p.inputs if by_name[i.src].loop != loop]
    while todo:
        q = by_name[todo.pop()]
        if q.name in seen:
            continue
        seen.add(q.name)
        if q.region is not None:
            raise GraphError(
                f"loop {loop!r} interleaves epochs, but what enters it comes from {q.name!r} in region "
                f"{q.region!r}: an interleaved loop must read epochs computed ahead of every loop and region. "
                "Build it without interleave=True"
            )
        todo += [i.src for i in q.inputs]
