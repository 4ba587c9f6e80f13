"""Sequence-number regions: per-record eager processing inside an epoch pipeline.

Some processors must persist every update before its input is acknowledged - the
MillWheel-style scheme of section 2.1 of the Falkirk Wheel paper, where each record
on an edge has a sequence number and a processor's state after records 1..s is
committed, with what it sent, before it takes record s + 1. A region gives a pipeline
of epochs such processors::

    stats = p.sequenced("stats", chunk=100)
    numbered = stats.enter("number", queries)                  # epochs -> numbers
    counted = numbered.stateful("per_user", "user", count, policy=EagerCheckpoint())
    per_epoch = stats.leave("regroup", counted)                 # numbers -> epochs

* ``enter`` is the paper's translator from epochs to sequence numbers (section 3.2):
  it numbers each epoch's records once, in arrival order, all of epoch e before any
  of e + 1, and logs them, so a replay sees the same numbers. Epoch e's k-th record
  gets ``(e - 1) * SEQ_BLOCK + k`` (:mod:`falkirk.time.ticks`): φ(↓e) is every number
  of the epochs up to e.
* inside, rows are taken ``chunk`` numbers at a time, in order; a row derived from a
  record keeps its number, so every edge inside the region has the identity
  projection. After each chunk, every processor of the region persists what its
  policy asks - an :class:`~falkirk.graph.EagerCheckpoint` processor its state delta
  and its output - and one commit records Ξ at ↓(seq, n) for the chunk's last number
  n. A crash resumes after the last committed chunk: the records up to n are never
  applied twice, those after never lost. ``chunk=1`` is the paper's per-record
  scheme; larger chunks amortise Spark's cost per job.
* ``leave`` is the translator back to epochs: it holds epoch e's rows until all of
  its numbers are through, then passes them on as rows of epoch e (φ(↓(seq, n)) =
  the epochs whose whole block is at or below n).

A region has one ``enter`` (union streams before it) and at least one ``leave``.
Keyed processors in a region must be checkpointed eagerly (that is what the region
is for); the others may log their outputs or not. Sources, sinks, joins, lookups,
buffers and loops stay outside. At most ``SEQ_BLOCK - 2`` (about a million) records of
one epoch may enter a region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from falkirk.graph.exceptions import GraphError
from falkirk.graph.policies import Policy
from falkirk.graph.specs import NumberSpec, OperatorSpec, RegroupSpec

#: A stream of the pipeline (:class:`falkirk.graph.Stream`).
Stream = Any

#: The most records of a region's chunk.
MAX_CHUNK = 1 << 19


class Graph(Protocol):
    """What a region needs of its :class:`~falkirk.graph.Pipeline`."""

    def add(self, name: str, spec: OperatorSpec, inputs: Sequence[Stream], policy: Policy | None) -> Stream: ...


@dataclass(frozen=True)
class Sequenced:
    """A sequence-number region of ``pipeline`` (build it with :meth:`Pipeline.sequenced`);
    ``chunk``: the records committed at a time (see the module docstring)."""

    pipeline: Graph
    name: str
    chunk: int

    def __post_init__(self) -> None:
        if isinstance(self.chunk, bool) or not isinstance(self.chunk, int) or not 1 <= self.chunk <= MAX_CHUNK:
            raise GraphError(f"region {self.name!r}: chunk must be an int in 1..{MAX_CHUNK}, got {self.chunk!r}")

    def enter(self, name: str, stream: Stream) -> Stream:
        """``stream`` (of epochs) numbered into the region: epoch e's records in
        arrival order after all of epoch e - 1's. The numbered rows are logged (a
        replay must see the same numbers)."""
        return self.pipeline.add(name, NumberSpec(sequence=self.name), [stream], None)

    def leave(self, name: str, stream: Stream) -> Stream:
        """``stream`` (inside the region) back to epochs: the rows of epoch e's
        records, once all of them are through."""
        return self.pipeline.add(name, RegroupSpec(sequence=self.name), [stream], None)
