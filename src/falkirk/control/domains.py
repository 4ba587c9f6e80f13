"""The engine's time domains: epochs, ``(epoch, iteration)`` inside loops, and
sequence numbers inside sequence-number regions.

Every processor of a pipeline has epochs as times, except the processors of a loop
(:mod:`falkirk.graph.loops`), whose times are ``(epoch, iteration)`` in the
lexicographic order, and those of a region (:mod:`falkirk.graph.sequences`), whose
times are sequence numbers. Where a processor stands is a tick (:mod:`falkirk.time.ticks`);
:func:`topology` hands recovery the real domains and edge projections.
"""

from __future__ import annotations

from falkirk.control.exceptions import ControlInvariantError
from falkirk.graph import Pipeline, Processor
from falkirk.graph.specs import EnterSpec, FeedbackSpec, LeaveSpec, NumberSpec, RegroupSpec
from falkirk.recovery import Topology
from falkirk.time import (
    Domain,
    EpochDomain,
    EpochToSeq,
    Feedback,
    Frontier,
    Identity,
    LoopEntry,
    LoopExit,
    Projection,
    SeqToEpoch,
    TimeError,
)
from falkirk.time.ticks import LOOP, SEQ, SEQ_BLOCK, SEQ_LABEL, Tick

EPOCHS = EpochDomain()


def input_log_key(processor: str, k: int) -> str:
    """The log key of input ``k`` of a processor that logs its inputs
    (:attr:`~falkirk.graph.Policy.logs_inputs`)."""
    return f"{processor}.in{k}"


def domain_of(p: Processor) -> Domain:
    """The time domain of processor ``p``."""
    if p.loop is not None:
        return LOOP
    return SEQ if p.sequence is not None else EPOCHS


def projection_of(src: Processor, dst: Processor) -> Projection:
    """The projection of the edge ``src -> dst``: into a loop, around it, out of it,
    into a sequence-number region (epoch e owns the numbers
    ``((e - 1) * SEQ_BLOCK, e * SEQ_BLOCK]``, :mod:`falkirk.time.ticks`) or out of
    it, or the identity."""
    if isinstance(src.spec, NumberSpec):
        return EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK)
    if isinstance(src.spec, RegroupSpec):
        return SeqToEpoch(SEQ_LABEL, block=SEQ_BLOCK)
    if isinstance(dst.spec, EnterSpec):
        return LoopEntry(domain_of(src), LOOP)
    if isinstance(dst.spec, LeaveSpec):
        return LoopExit(LOOP, domain_of(dst))
    if isinstance(src.spec, FeedbackSpec):
        return Feedback(LOOP)
    return Identity(domain_of(src))


def topology(pipeline: Pipeline) -> Topology:
    """The pipeline as recovery sees it: each processor's domain, each edge's projection."""
    procs = pipeline.processors
    edges = [(name, i.src, q.name, projection_of(procs[i.src], q)) for name, i, q, _ in pipeline.edges()]
    return Topology.build({name: domain_of(p) for name, p in procs.items()}, edges)


def epoch_of(f: Frontier) -> int:
    """e for the frontier ↓e (0 for ∅). ⊤ is refused: persisted frontiers are finite."""
    return tick(f).epoch


def tick(f: Frontier) -> Tick:
    """t for the frontier ↓t of a processor (see :meth:`falkirk.time.ticks.Tick.of_frontier`)."""
    try:
        return Tick.of_frontier(f)
    except TimeError as exc:
        raise ControlInvariantError(str(exc)) from exc

