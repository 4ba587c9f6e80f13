"""Building a pipeline from PySpark DataFrame code.

A :class:`Pipeline` is a graph of processors joined by streams. Every processor
works epoch by epoch (the time domain of this engine) and declares a
fault-tolerance :mod:`policy <falkirk.graph.policies>`::

    p = Pipeline("clicks")
    events = p.source("events", FileSource("in/", format="csv", schema=SCHEMA))
    valid, rejected = events.validate("validate", check_rows)      # reason column
    rejected.sink("dead_letter", ParquetTableSink("rejected/"))
    per_user = (valid.map("parse", parse)                          # DataFrame -> DataFrame
                     .exchange("by_user", "user_id")
                     .aggregate("stats", "user_id", {"n": ("count", None)},
                                policy=LazyCheckpoint(every=5)))
    per_user.sink("out", ParquetTableSink("out/"))

Graphs are general: a stream may be read by several processors (fan-out), a pipeline
may have several sources, and :meth:`Stream.union`, :meth:`Stream.join` and
:meth:`Stream.lookup` take several inputs. Nothing runs until the pipeline is given
to :class:`falkirk.runtime.Engine`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from falkirk.graph.edge_id import EdgeId
from falkirk.graph.errors import DEFAULT_ERROR_LIMIT, ERRORS_PORT, ErrorLimit, OnError
from falkirk.graph.exceptions import GraphError
from falkirk.graph.loops import Loop
from falkirk.graph.plugins import Source
from falkirk.graph.policies import (
    AtBarriers,
    GlobalCheckpoints,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.scopes import check_interleaved, check_sequence_policy, out_scope, scope_of
from falkirk.graph.sequences import Sequenced
from falkirk.graph.specs import (
    LOOP_POLICIES,
    FeedbackSpec,
    NumberSpec,
    OperatorSpec,
    SourceSpec,
)
from falkirk.graph.stream import Stream
from falkirk.graph.windows import WindowSpec

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Input:
    """One input of a processor: the output ``port`` of processor ``src``."""

    src: str
    port: str

    @property
    def key(self) -> str:
        """``src.port``: the name of the output (its log, its schema)."""
        return f"{self.src}.{self.port}"


@dataclass(frozen=True)
class Processor:
    """One node of the pipeline: its spec (what it does), inputs and policy;
    ``loop`` names the loop it runs in (its times are then ``(epoch, iteration)``),
    ``sequence`` the sequence-number region (its times are then sequence numbers);
    both None for a processor of epochs."""

    name: str
    spec: OperatorSpec
    inputs: tuple[Input, ...]
    policy: Policy
    loop: str | None = None
    sequence: str | None = None
    #: What it does with rows it cannot process (None: the pipeline's ``on_error``).
    on_error: OnError | None = None

    @property
    def region(self) -> str | None:
        """The loop or sequence-number region it runs in (None: epochs)."""
        return self.loop or self.sequence

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def ports(self) -> tuple[str, ...]:
        """Its output ports: the spec's, then ``errors`` where it has one."""
        ports = self.spec.output_ports
        return (*ports, ERRORS_PORT) if self.has_errors else ports

    @property
    def has_errors(self) -> bool:
        """Whether it has an ``errors`` output (:mod:`falkirk.graph.errors`): every
        processor of epochs that reads a stream, except sinks and the translators
        of loops and regions."""
        spec = self.spec
        return not (spec.source or spec.sink or spec.structure is not None or self.region is not None)

    @property
    def stateful(self) -> bool:
        """Keeps keyed state between epochs."""
        return self.spec.keyed


class Pipeline:
    """A dataflow of processors (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        checkpoints: GlobalCheckpoints | None = None,
        on_error: OnError | str = OnError.DEAD_LETTER,
        error_limit: ErrorLimit = DEFAULT_ERROR_LIMIT,
    ) -> None:
        """``checkpoints``: pipeline-wide barrier checkpoints instead of per-processor
        policies (see :class:`~falkirk.graph.GlobalCheckpoints`). ``on_error``: what
        a processor does with rows it cannot process, unless it says otherwise
        (``"dead_letter"`` or ``"stop"``), and ``error_limit`` how many it may
        quarantine per epoch (see :mod:`falkirk.graph.errors`)."""
        self.name = name
        self.processors: dict[str, Processor] = {}
        self.checkpoints = checkpoints
        self.on_error = OnError.of(on_error, f"pipeline {name!r}")
        if not isinstance(error_limit, ErrorLimit):
            raise GraphError(f"pipeline {name!r}: error_limit must be an ErrorLimit(rows=..., share=...), got {error_limit!r}")
        self.error_limit = error_limit
        self.loops: dict[str, Loop] = {}
        self.sequences: dict[str, Sequenced] = {}

    def iterate(self, name: str, *, max_iterations: int = 1000, on_limit: str = "stop", interleave: bool = False) -> Loop:
        """A loop region (see :mod:`falkirk.graph.loops`): streams enter it with
        :meth:`Loop.enter`, go around with :meth:`Loop.feedback` and
        :meth:`Loop.connect`, and leave with :meth:`Loop.leave`. An epoch's
        iterations end at the first that sends nothing back, or after
        ``max_iterations``: then, if rows are still sent back, ``on_limit="stop"``
        drops them (with a warning) and ``"fail"`` stops the pipeline with an error.
        ``interleave=True``: the epochs in flight iterate together, round by round,
        for a loop whose times are independent (checked when the pipeline runs; see
        :mod:`falkirk.graph.loops`)."""
        self._region_name("loop", name)
        loop = Loop(self, name, max_iterations, on_limit, interleave)
        self.loops[name] = loop
        return loop

    def sequenced(self, name: str, *, chunk: int = 1000) -> Sequenced:
        """A sequence-number region (see :mod:`falkirk.graph.sequences`): per-record
        eager processing, ``chunk`` records committed at a time. Streams enter it with
        :meth:`Sequenced.enter` (numbered, epoch after epoch) and leave with
        :meth:`Sequenced.leave` (regrouped into epochs)."""
        self._region_name("region", name)
        region = Sequenced(self, name, chunk)
        self.sequences[name] = region
        return region

    def _region_name(self, what: str, name: str) -> None:
        if not _NAME.fullmatch(name) or name in self.loops or name in self.sequences:
            raise GraphError(f"{what} name {name!r}: use a new name of letters, digits and underscores")
        if self.checkpoints is not None:
            raise GraphError(
                f"{what} {name!r}: pipeline {self.name!r} has global checkpoints, which do not cover loops "
                "or sequence-number regions yet; use per-processor policies"
            )

    def source(self, name: str, source: Source) -> Stream:
        """A source (:mod:`falkirk.io`: files or a generator): it cuts its input into
        epochs. A pipeline may have several: each epoch reads the next input of every
        source (a source with nothing new contributes no rows)."""
        return self.add(name, SourceSpec(reader=source), [], None)

    def union(self, name: str, *streams: Stream, policy: Policy | None = None) -> Stream:
        """The rows of all ``streams`` (same columns): see :meth:`Stream.union`."""
        if not streams:
            raise GraphError(f"union {name!r}: give the streams to merge")
        return streams[0].union(name, *streams[1:], policy=policy)

    def add(
        self, name: str, spec: OperatorSpec, inputs: Sequence[Stream], policy: Policy | None, on_error: OnError | str | None = None
    ) -> Stream:
        """Add processor ``name`` (see :meth:`Stream.apply`)."""
        if not _NAME.fullmatch(name):
            raise GraphError(
                f"processor name {name!r}: use letters, digits and underscores, starting with a letter"
            )
        if name in self.processors:
            raise GraphError(f"processor {name!r} is defined twice; give each processor its own name")
        if not isinstance(spec, OperatorSpec):
            raise GraphError(f"processor {name!r}: expected an operator spec, got {spec!r}")
        for port in (*spec.ports, *spec.optional_ports):
            if not _NAME.fullmatch(port):  # edge names (EdgeId) are recorded in the metadata
                raise GraphError(
                    f"processor {name!r}: its {type(spec).__name__} declares output port {port!r}; "
                    "name ports with letters, digits and underscores, starting with a letter"
                )
        if not isinstance(spec, FeedbackSpec):  # a feedback gets its input later (connect)
            spec.check_arity(name, len(inputs))
        outs = {out_scope(self.processors[i.processor].spec, self.processors[i.processor].region) for i in inputs if i.processor in self.processors}
        region = scope_of(name, spec, outs, self.loops, self.sequences)
        loop = region if region in self.loops else None
        sequence = region if region in self.sequences else None
        if isinstance(spec, WindowSpec) and region is not None:
            raise GraphError(
                f"processor {name!r}: a window processor cannot be inside {region!r} (its watermark advances per "
                "epoch); window the stream before it enters the region or after it leaves"
            )
        if loop is not None and not isinstance(policy or Stateless(), LOOP_POLICIES):
            allowed = ", ".join(t.__name__ for t in LOOP_POLICIES)
            raise GraphError(f"processor {name!r} is in loop {loop!r}, where it can use {allowed}, not {policy.name}")  # type: ignore[union-attr]
        if sequence is not None:
            check_sequence_policy(name, spec, sequence, policy)
        if isinstance(spec, NumberSpec) and policy is None:
            policy = LogOutputs()
        if self.checkpoints is not None:
            if policy is not None and not isinstance(policy, Stateless):
                raise GraphError(
                    f"processor {name!r}: pipeline {self.name!r} has global checkpoints, which decide "
                    f"every processor's persistence; drop policy={policy.name}() (or the pipeline's checkpoints=)"
                )
            copies = policy.replicas if policy is not None else 1
            policy = AtBarriers(compact_every=self.checkpoints.compact_every, replicas=copies) if spec.keyed else Stateless(replicas=copies)
        elif isinstance(policy, AtBarriers):
            raise GraphError(f"processor {name!r}: AtBarriers is set by Pipeline(checkpoints=GlobalCheckpoints(...)), not per processor")
        policy = policy or Stateless()
        if not isinstance(policy, (*spec.policies, AtBarriers)):
            allowed = ", ".join(t.__name__ for t in spec.policies)
            raise GraphError(f"processor {name!r} ({spec.kind}) cannot use {policy.name}: it accepts {allowed}")
        for s in inputs:
            if s.pipeline is not self:
                raise GraphError(f"processor {name!r}: its input comes from another pipeline")
        chosen = None if on_error is None else OnError.of(on_error, f"processor {name!r}")
        self.processors[name] = Processor(
            name, spec, tuple(Input(s.processor, s.port) for s in inputs), policy, loop, sequence, chosen
        )
        if chosen is OnError.DEAD_LETTER and not self.processors[name].has_errors:
            raise GraphError(f"processor {name!r} ({spec.kind}) has no errors output; drop its on_error=")
        return Stream(self, name, spec.ports[0] if spec.ports else "out")

    def connect_feedback(self, loop: str, feedback: Stream, stream: Stream) -> None:
        """Give the feedback processor of ``feedback`` its input ``stream`` (see
        :meth:`Loop.connect`)."""
        fb = self.processors.get(feedback.processor)
        if fb is None or not isinstance(fb.spec, FeedbackSpec) or fb.spec.loop != loop:
            raise GraphError(f"loop {loop!r}: {feedback.processor!r} is not a feedback of this loop; make one with loop.feedback")
        if fb.inputs:
            raise GraphError(f"feedback {fb.name!r} is connected already")
        if stream.pipeline is not self or self.processors[stream.processor].loop != loop:
            raise GraphError(f"feedback {fb.name!r}: connect it to a stream inside loop {loop!r}")
        self.processors[fb.name] = Processor(fb.name, fb.spec, (Input(stream.processor, stream.port),), fb.policy, fb.loop, on_error=fb.on_error)

    # -- queries used by the runtime ---------------------------------------------------

    def spec_of(self, processor: str) -> OperatorSpec | None:
        """The spec of ``processor`` (None: no such processor)."""
        p = self.processors.get(processor)
        return p.spec if p is not None else None

    def on_error_of(self, p: Processor) -> OnError:
        """What ``p`` does with rows it cannot process: its own choice, else the
        pipeline's (a processor without an ``errors`` output stops)."""
        if not p.has_errors:
            return OnError.STOP
        return p.on_error or self.on_error

    def consumers(self, processor: str, port: str | None = None) -> list[Processor]:
        """Processors reading ``processor`` (on ``port`` if given)."""
        return [
            q
            for q in self.processors.values()
            if any(i.src == processor and (port is None or i.port == port) for i in q.inputs)
        ]

    def edges(self) -> list[PipelineEdge]:
        """Every edge: its name (:class:`EdgeId`: ``src.port>dst``, with ``#k`` added
        where one output feeds several inputs of the same receiver, a self-join), the
        output it carries, the receiver and the receiver's input index."""
        found = []
        for q in self.processors.values():
            for k, i in enumerate(q.inputs):
                shared = sum(j == i for j in q.inputs) > 1
                edge = EdgeId(i.src, i.port, q.name, k if shared else None)
                found.append(PipelineEdge(str(edge), i, q, k))
        return found

    def check(self) -> None:
        """Raise :class:`GraphError` if the pipeline cannot run."""
        if not any(p.spec.source for p in self.processors.values()):
            raise GraphError(f"pipeline {self.name!r} has no source; add one with Pipeline.source")
        for loop in self.loops:
            kinds = [p.kind for p in self.processors.values() if p.loop == loop or p.spec.translates == loop]
            for kind, how in (("enter", "loop.enter"), ("feedback", "loop.feedback and loop.connect"), ("leave", "loop.leave")):
                if kind not in kinds:
                    raise GraphError(f"loop {loop!r} has no {kind}; add one with {how}")
        interleaved = [name for name, built in self.loops.items() if built.interleave]
        if len(interleaved) > 1:
            raise GraphError(
                f"loops {interleaved} all interleave epochs; a pipeline may have one interleaved loop. Build "
                "the others without interleave=True"
            )
        for name in interleaved:
            check_interleaved(name, list(self.processors.values()))
        for region in self.sequences:
            kinds = [p.kind for p in self.processors.values() if p.spec.translates == region]
            for kind, how in (("number", "region.enter"), ("regroup", "region.leave")):
                if kind not in kinds:
                    raise GraphError(f"sequence-number region {region!r} has no {kind}; add one with {how}")
            if kinds.count("number") > 1:
                raise GraphError(
                    f"sequence-number region {region!r} has {kinds.count('number')} enters; a region numbers one "
                    "stream: union the streams before region.enter (or give each its own region)"
                )
        for p in self.processors.values():
            if isinstance(p.spec, FeedbackSpec) and not p.inputs:
                raise GraphError(f"feedback {p.name!r} is not connected; give it its input with loop.connect")
        for p in self.processors.values():
            writer = getattr(p.spec, "writer", None)
            every = self.checkpoints.every if self.checkpoints is not None else 1
            if every != 1 and getattr(writer, "needs_prompt_release", False):
                raise GraphError(
                    f"sink {p.name!r} holds each epoch's rows locked until the epoch is released, and "
                    f"{self.checkpoints} releases epochs only at barriers: the next epoch would wait for "
                    "locks no barrier can free. Use GlobalCheckpoints(every=1), per-processor "
                    "policies, or the sink's append mode."
                )
            for port in p.ports:
                if port not in (*p.spec.optional_ports, ERRORS_PORT) and not self.consumers(p.name, port):
                    raise GraphError(
                        f"processor {p.name!r}: output {port!r} goes nowhere; send it to a sink "
                        "or another processor"
                    )


class PipelineEdge(NamedTuple):
    """One edge of a pipeline (see :meth:`Pipeline.edges`)."""

    name: str
    input: Input
    receiver: Processor
    position: int

    @property
    def id(self) -> EdgeId:
        """The edge's name as a value."""
        return EdgeId.parse(self.name)
