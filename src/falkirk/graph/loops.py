"""Loops: a region of a pipeline whose processors run iteration after iteration.

Inside a loop every event has an ``(epoch, iteration)`` time (section 2.3 and
Figure 2(c) of the Falkirk Wheel paper): epoch e's rows enter at ``(e, 0)``, each
iteration's rows sent back around the loop arrive at the next iteration, and the loop
ends for epoch e at a fixed point - the first iteration that sends nothing back - or
after ``max_iterations`` iterations. The rows that leave the loop in any iteration of
epoch e are rows of epoch e outside it::

    loop = p.iterate("cc", max_iterations=100)
    again = loop.feedback("again", schema="vertex long, label long")   # rows of (e, i-1)
    seeds = loop.enter("seeds", edges)                                  # rows of (e, 0)
    step = seeds.union("proposals", again).exchange(...).stateful(...)
    loop.connect(again, step.map("spread", ...))                        # close the cycle
    changes = loop.leave("changes", step.map("changed", ...))           # back to epochs

Recovery sees the loop as it is: its processors have ``(epoch, iteration)`` times in
the lexicographic order, the edge into ``enter`` maps epoch t to every ``(t, c)``
(loop entry), the edges out of a feedback processor add one to the iteration, and the
edge into ``leave`` keeps only epochs all of whose iterations are done (loop exit).
A processor in a loop checkpointed eagerly (:class:`~falkirk.graph.EagerCheckpoint`)
persists its state and output after every iteration, so a crash in the middle of a
long epoch resumes from the last iteration, not from the epoch's start; lazily
(:class:`~falkirk.graph.LazyCheckpoint`) only when an epoch's iterations are over,
every ``every`` epochs.

Later epochs enter the loop while earlier ones still iterate. Everything upstream of
the loop runs ahead (up to the engine's ``max_in_flight`` epochs). By default the loop
then applies epochs in order: epoch e + 1's first iteration runs after e's last, which
a loop whose state carries over from epoch to epoch (label propagation) needs. A loop
built with ``interleave=True`` runs the epochs in flight *together*, in rounds: round
r runs the next iteration of every epoch inside the loop, oldest epoch first, and an
epoch whose upstream part is computed joins at the next round. An epoch with few
iterations then leaves before an earlier, longer one has finished. It is allowed
when the loop's times are independent of each other, which is checked:

* every keyed processor in the loop keeps its state partitioned by logical time
  (``buffer``; section 3.3 of the paper: only such state may take a later time
  before an earlier one), and nothing in the loop keeps state across times otherwise;
* its processors persist at epoch ends only (``LazyCheckpoint`` or ``Stateless``):
  what they persist is committed when an epoch's iterations are over, in epoch order;
  the checkpoint of epoch e then holds all of e's times and none of e + 1's, though
  e + 1's parts are in the state already (a *selective* checkpoint, section 2.3), and
  a rollback to it restores exactly "all of e, none of e + 1";
* nothing upstream of it is in another loop or sequence-number region.

What comes after the loop still runs, and commits, epoch by epoch in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from falkirk.graph.exceptions import GraphError
from falkirk.graph.policies import Policy
from falkirk.graph.specs import EnterSpec, FeedbackSpec, LeaveSpec, OperatorSpec

#: A stream of the pipeline (:class:`falkirk.graph.Stream`).
Stream = Any


class Graph(Protocol):
    """What a loop needs of its :class:`~falkirk.graph.Pipeline`."""

    def add(self, name: str, spec: OperatorSpec, inputs: Sequence[Stream], policy: Policy | None) -> Stream: ...

    def connect_feedback(self, loop: str, feedback: Stream, stream: Stream) -> None: ...

#: The most iterations one epoch may take in a loop.
MAX_ITERATIONS = 100_000


@dataclass(frozen=True)
class Loop:
    """A loop region of ``pipeline`` (build it with :meth:`Pipeline.iterate`)."""

    pipeline: Graph
    name: str
    max_iterations: int
    #: At ``max_iterations`` with rows still sent back: ``"stop"`` the epoch's
    #: iterations there (a warning is logged; the rows are dropped), or ``"fail"``
    #: (a :class:`GraphError`: for computations whose result is wrong unless they
    #: reach their fixed point).
    on_limit: str = "stop"
    #: Run the epochs in flight together, round by round (see the module docstring).
    interleave: bool = False

    def __post_init__(self) -> None:
        if self.on_limit not in ("stop", "fail"):
            raise GraphError(f"loop {self.name!r}: on_limit must be 'stop' or 'fail', got {self.on_limit!r}")
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, int) or not (
            1 <= self.max_iterations <= MAX_ITERATIONS
        ):
            raise GraphError(
                f"loop {self.name!r}: max_iterations must be an int in 1..{MAX_ITERATIONS}, got {self.max_iterations!r}"
            )
        if not isinstance(self.interleave, bool):
            raise GraphError(f"loop {self.name!r}: interleave must be True or False, got {self.interleave!r}")

    def enter(self, name: str, stream: Stream, *, policy: Policy | None = None) -> Stream:
        """``stream`` (of epochs) inside the loop: epoch e's rows at ``(e, 0)``."""
        return self.pipeline.add(name, EnterSpec(loop=self.name), [stream], policy)

    def feedback(self, name: str, *, schema: str, policy: Policy | None = None) -> Stream:
        """A stream of the rows sent back around the loop: what the stream given to
        :meth:`connect` sends at ``(e, i)`` arrives here at ``(e, i + 1)`` (nothing
        at ``(e, 0)``). ``schema``: the rows' columns as a DDL string."""
        return self.pipeline.add(name, FeedbackSpec(loop=self.name, schema=schema), [], policy)

    def connect(self, feedback: Stream, stream: Stream) -> None:
        """Close the cycle: ``stream`` (inside this loop) is sent back to ``feedback``."""
        self.pipeline.connect_feedback(self.name, feedback, stream)

    def leave(self, name: str, stream: Stream, *, policy: Policy | None = None) -> Stream:
        """``stream`` (inside the loop) outside it: the rows of every iteration of
        epoch e, as rows of epoch e."""
        return self.pipeline.add(name, LeaveSpec(loop=self.name), [stream], policy)

