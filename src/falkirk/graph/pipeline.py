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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from falkirk.graph.exceptions import GraphError
from falkirk.graph.loops import Loop
from falkirk.graph.plugins import Sink, Source, TransactionalSink
from falkirk.graph.policies import (
    AtBarriers,
    GlobalCheckpoints,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.scopes import check_sequence_policy, out_scope, scope_of
from falkirk.graph.sequences import Sequenced
from falkirk.graph.specs import (
    LOOP_POLICIES,
    AggregateSpec,
    BufferSpec,
    ExchangeSpec,
    FeedbackSpec,
    JoinSpec,
    LookupSpec,
    MapSpec,
    NumberSpec,
    OperatorSpec,
    SinkSpec,
    SourceSpec,
    StatefulSpec,
    UnionSpec,
    ValidateSpec,
    keys,
)
from falkirk.graph.windows import WindowShape, WindowSpec

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


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

    @property
    def region(self) -> str | None:
        """The loop or sequence-number region it runs in (None: epochs)."""
        return self.loop or self.sequence

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def ports(self) -> tuple[str, ...]:
        return self.spec.ports

    @property
    def stateful(self) -> bool:
        """Keeps keyed state between epochs."""
        return self.spec.keyed


@dataclass(frozen=True)
class Stream:
    """The output ``port`` of processor ``processor``: what the next step consumes."""

    pipeline: Pipeline
    processor: str
    port: str = "out"

    def apply(self, name: str, spec: OperatorSpec, *others: Stream, policy: Policy | None = None) -> Stream:
        """Add processor ``name`` running ``spec`` on this stream (and ``others``, its
        further inputs, in order); returns its first output. Every builder below is a
        shorthand for this; operators of your own are added with it."""
        return self.pipeline.add(name, spec, [self, *others], policy)

    def map(self, name: str, fn: Callable[..., Any], *, policy: Policy | None = None) -> Stream:
        """A stateless transform ``fn(df) -> df`` (filters, projections, explode...).

        ``fn`` may take a second argument, the epoch number."""
        return self.apply(name, MapSpec(fn=fn), policy=policy)

    def validate(
        self, name: str, fn: Callable[[Any], Any], *, policy: Policy | None = None
    ) -> tuple[Stream, Stream]:
        """Split rows with ``fn(df) -> df`` returning the rows plus a string column
        ``reason``: null for valid rows (sent on the first stream, without
        ``reason``), the reason otherwise (second stream, for a dead-letter sink)."""
        self.apply(name, ValidateSpec(fn=fn), policy=policy)
        return Stream(self.pipeline, name, "valid"), Stream(self.pipeline, name, "rejected")

    def exchange(self, name: str, key: str | Sequence[str], *, policy: Policy | None = None) -> Stream:
        """Repartition rows by ``key`` (a processor boundary: rows of one key meet)."""
        return self.apply(name, ExchangeSpec(key=keys(name, key)), policy=policy)

    def aggregate(
        self,
        name: str,
        key: str | Sequence[str],
        aggregates: Mapping[str, tuple[str, str | None]],
        *,
        policy: Policy | None = None,
    ) -> Stream:
        """Running aggregates per key: ``{"out_col": (func, in_col)}`` with func one of
        count (in_col may be None), sum, min, max, avg, first, last. Each epoch emits,
        for the keys it touched, the key, the updated aggregates and nothing else."""
        try:
            spec = AggregateSpec(key=keys(name, key), aggregates=dict(aggregates))
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, policy=policy)

    def stateful(
        self,
        name: str,
        key: str | Sequence[str],
        fn: Callable[..., Any],
        *,
        state_schema: str,
        output_schema: str,
        policy: Policy | None = None,
        on_epoch_end: Callable[..., Any] | None = None,
        vectorized: bool = False,
    ) -> Stream:
        """A user function with per-key state, run in pandas through Spark.

        ``fn(key, rows, state) -> (outputs, new_state)``: ``rows`` are the key's new
        rows of this epoch, ``state`` its stored state (a pandas DataFrame of
        ``state_schema``, empty for a new key); return the rows to emit
        (``output_schema``) and the new state (``None`` or an empty frame deletes
        the key). The state schema must not repeat the key columns.

        ``on_epoch_end(key, state, epoch) -> (outputs, new_state)``, if given, is the
        epoch-completion notification: once an epoch is complete at this processor
        (all its input for the epoch has arrived), it is called for every key that
        holds state and received no rows in that epoch - to expire idle keys, emit
        timeouts or close windows. It makes every epoch cost O(state) instead of
        O(input), since every stored key is visited.

        ``vectorized=True`` calls ``fn(rows, state) -> (outputs, new_state)`` instead,
        once per partition of the epoch: ``rows`` holds the epoch's rows of a set of
        keys, ``state`` the stored rows of those keys (key columns included); return
        the outputs and the new state rows of every key that keeps state (key columns
        included; a key left out loses its state). No Python call per key: with
        pandas group-bys it is typically 10-100x faster than the per-key form.
        Not combinable with ``on_epoch_end``.

        Rows and state reach ``fn`` as pandas DataFrames converted from Arrow as
        PySpark's pandas UDFs convert them: an integer column holding a null becomes
        float64, which holds integers exactly only up to 2^53. Keep integer columns
        that may exceed that (ids) free of nulls - e.g. a sentinel such as -1."""
        try:
            spec = StatefulSpec(
                key=keys(name, key),
                fn=fn,
                state_schema=state_schema,
                output_schema=output_schema,
                on_epoch_end=on_epoch_end,
                vectorized=vectorized,
            )
        except GraphError as exc:
            raise GraphError(f"{name}: {exc}") from exc
        return self.apply(name, spec, policy=policy)

    def union(self, name: str, *others: Stream, policy: Policy | None = None) -> Stream:
        """The rows of this stream and of ``others`` (all with the same columns and
        types, in any order): one stream."""
        return self.apply(name, UnionSpec(), *others, policy=policy)

    def join(
        self,
        name: str,
        other: Stream,
        on: str | Sequence[str],
        *,
        how: str = "inner",
        retain: int | None = None,
        policy: Policy | None = None,
    ) -> Stream:
        """A keyed stream-stream equi-join of this stream (left) and ``other``
        (right) on the columns ``on``. Both sides' rows are kept as state, so rows
        that arrive in different epochs still meet: each pair of a left and a right
        row with equal keys is emitted exactly once, in the first epoch in which both
        have arrived. Output columns: ``on``, the left side's other columns, the
        right side's (their names must differ).

        ``retain=N``: a row waits N epochs for a match (its arrival epoch and the N-1
        after it) and then leaves the state, so the state holds N epochs of rows;
        ``None`` (inner joins only) keeps every row forever. ``how="left"`` or
        ``"full"`` also emits a left (and right) row that never met a match, with
        nulls for the other side, in the last epoch it waited."""
        try:
            spec = JoinSpec(on=keys(name, on), how=how, retain=retain)
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, other, policy=policy)

    def lookup(
        self, name: str, table: Stream, on: str | Sequence[str], *, how: str = "left", policy: Policy | None = None
    ) -> Stream:
        """Each row of this stream with the current version of a keyed table that
        another part of the pipeline maintains: ``table`` is a stream of upserts (each
        row the new version of its key; for example an aggregate's output, or a batch
        computation re-run every N epochs). A row of epoch e sees the table as of the
        end of epoch e. Output: this stream's columns, then the table's other columns
        (null when the key has no version yet; ``how="inner"`` drops such rows). If
        an epoch has several rows for one key, the greatest of them (comparing all
        columns) is the new version."""
        try:
            spec = LookupSpec(on=keys(name, on), how=how)
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, table, policy=policy)

    def window(
        self,
        name: str,
        key: str | Sequence[str],
        time: str,
        shape: WindowShape,
        aggregates: Mapping[str, tuple[str, str | None]] | None = None,
        *,
        watermark_delay: int = 0,
        mode: str = "append",
        fn: Callable[..., Any] | None = None,
        output_schema: str = "",
        policy: Policy | None = None,
    ) -> Stream:
        """Aggregates per key and event-time window (:mod:`falkirk.graph.windows`):
        ``{"out_col": (func, in_col)}`` with func one of count (in_col may be None),
        sum, min, max, avg.

        Output rows: the key, ``window_start`` (inclusive), ``window_end`` (exclusive)
        and the aggregates. ``mode="append"``: one row per window, in the epoch that
        closes it (the first whose starting watermark is at or past its end) - never
        retracted, never repeated. ``mode="update"``: a row for every window an
        epoch's rows changed (its values so far).

        Rows whose window has closed (the watermark passed its end) are late: they
        go, with ``window_start``, ``window_end`` and a ``reason``, to the second
        stream, ``stream.late()`` - connect a dead-letter sink to keep them or leave
        it unconnected to drop them; they are counted either way. So are rows
        without an event time or a key.

        An epoch costs what its own rows and the windows that close cost: the open
        windows are only looked up by key in place, never shuffled or visited in
        Python. ``policy``: any checkpoint policy, or
        :class:`~falkirk.graph.ContinuousEventualCheckpoint`.

        Instead of ``aggregates``, ``fn(key, window_start, window_end, rows) ->
        pandas.DataFrame`` (columns ``output_schema``, any number of rows) runs on a
        window's rows (a pandas DataFrame of the input's columns) whenever the window
        is emitted; the output rows are the key, the window and ``fn``'s columns.
        The window then keeps its rows in its state (and, under CEC, in its
        footprints)."""
        try:
            spec = WindowSpec(
                key=keys(name, key),
                time=time,
                shape=shape,
                aggregates=dict(aggregates or {}),
                watermark_delay=watermark_delay,
                mode=mode,
                fn=fn,
                output_schema=output_schema,
            )
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, policy=policy)

    def late(self) -> Stream:
        """The late rows of a window processor (see :meth:`window`)."""
        p = self.pipeline.processors.get(self.processor)
        if p is None or not isinstance(p.spec, WindowSpec):
            raise GraphError(f"late(): {self.processor!r} is not a window processor")
        return Stream(self.pipeline, self.processor, "late")

    def buffer(self, name: str, *, retain: int | None = None, policy: Policy | None = None) -> Stream:
        """Keep every row of the stream, partitioned by epoch, and pass the rows on
        (the paper's Buffer, Figure 3); with ``retain=N`` only the last N epochs' rows
        are kept. Its state is partitioned by time, so epochs may reach it in any
        order - later epochs in flight need not wait for earlier ones - and its
        checkpoints are selective: a checkpoint of epoch A holds exactly the rows of
        the epochs up to A, even when rows of a later epoch B have arrived already,
        and a rollback to A restores "all of A, none of B". ``rows()`` on its operator
        gives what it holds."""
        try:
            spec = BufferSpec(retain=retain)
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, policy=policy)

    def sink(self, name: str, sink: Sink | TransactionalSink) -> None:
        """Write the stream to ``sink`` (exactly once per epoch; a
        :class:`~falkirk.graph.TransactionalSink` shows an epoch only once released)."""
        self.apply(name, SinkSpec(writer=sink))


class Pipeline:
    """A dataflow of processors (see the module docstring)."""

    def __init__(self, name: str, *, checkpoints: GlobalCheckpoints | None = None) -> None:
        """``checkpoints``: pipeline-wide barrier checkpoints instead of per-processor
        policies (see :class:`~falkirk.graph.GlobalCheckpoints`)."""
        self.name = name
        self.processors: dict[str, Processor] = {}
        self.checkpoints = checkpoints
        self.loops: dict[str, Loop] = {}
        self.sequences: dict[str, Sequenced] = {}

    def iterate(self, name: str, *, max_iterations: int = 1000, on_limit: str = "stop") -> Loop:
        """A loop region (see :mod:`falkirk.graph.loops`): streams enter it with
        :meth:`Loop.enter`, go around with :meth:`Loop.feedback` and
        :meth:`Loop.connect`, and leave with :meth:`Loop.leave`. An epoch's
        iterations end at the first that sends nothing back, or after
        ``max_iterations``: then, if rows are still sent back, ``on_limit="stop"``
        drops them (with a warning) and ``"fail"`` stops the pipeline with an error."""
        self._region_name("loop", name)
        loop = Loop(self, name, max_iterations, on_limit)
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
        if not _NAME.match(name) or name in self.loops or name in self.sequences:
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

    def add(self, name: str, spec: OperatorSpec, inputs: Sequence[Stream], policy: Policy | None) -> Stream:
        """Add processor ``name`` (see :meth:`Stream.apply`)."""
        if not _NAME.match(name):
            raise GraphError(
                f"processor name {name!r}: use letters, digits and underscores, starting with a letter"
            )
        if name in self.processors:
            raise GraphError(f"processor {name!r} is defined twice; give each processor its own name")
        if not isinstance(spec, OperatorSpec):
            raise GraphError(f"processor {name!r}: expected an operator spec, got {spec!r}")
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
            policy = AtBarriers(compact_every=self.checkpoints.compact_every) if spec.keyed else Stateless()
        elif isinstance(policy, AtBarriers):
            raise GraphError(f"processor {name!r}: AtBarriers is set by Pipeline(checkpoints=GlobalCheckpoints(...)), not per processor")
        policy = policy or Stateless()
        if not isinstance(policy, (*spec.policies, AtBarriers)):
            allowed = ", ".join(t.__name__ for t in spec.policies)
            raise GraphError(f"processor {name!r} ({spec.kind}) cannot use {policy.name}: it accepts {allowed}")
        for s in inputs:
            if s.pipeline is not self:
                raise GraphError(f"processor {name!r}: its input comes from another pipeline")
        self.processors[name] = Processor(
            name, spec, tuple(Input(s.processor, s.port) for s in inputs), policy, loop, sequence
        )
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
        self.processors[fb.name] = Processor(fb.name, fb.spec, (Input(stream.processor, stream.port),), fb.policy, fb.loop)

    # -- queries used by the runtime ---------------------------------------------------

    def consumers(self, processor: str, port: str | None = None) -> list[Processor]:
        """Processors reading ``processor`` (on ``port`` if given)."""
        return [
            q
            for q in self.processors.values()
            if any(i.src == processor and (port is None or i.port == port) for i in q.inputs)
        ]

    def edges(self) -> list[tuple[str, Input, Processor, int]]:
        """Every edge as (name, the output it carries, receiver, the receiver's input
        index). Named ``src.port>dst``, with ``#k`` added where one output feeds
        several inputs of the same receiver (a self-join)."""
        found = []
        for q in self.processors.values():
            for k, i in enumerate(q.inputs):
                name = f"{i.key}>{q.name}"
                if sum(j == i for j in q.inputs) > 1:
                    name += f"#{k}"
                found.append((name, i, q, k))
        return found

    def check(self) -> None:
        """Raise :class:`GraphError` if the pipeline cannot run."""
        if not any(p.spec.source for p in self.processors.values()):
            raise GraphError(f"pipeline {self.name!r} has no source; add one with Pipeline.source")
        for loop in self.loops:
            kinds = [p.kind for p in self.processors.values() if p.loop == loop or getattr(p.spec, "loop", None) == loop]
            for kind, how in (("enter", "loop.enter"), ("feedback", "loop.feedback and loop.connect"), ("leave", "loop.leave")):
                if kind not in kinds:
                    raise GraphError(f"loop {loop!r} has no {kind}; add one with {how}")
        for region in self.sequences:
            kinds = [p.kind for p in self.processors.values() if getattr(p.spec, "sequence", None) == region]
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
                if port not in p.spec.optional_ports and not self.consumers(p.name, port):
                    raise GraphError(
                        f"processor {p.name!r}: output {port!r} goes nowhere; send it to a sink "
                        "or another processor"
                    )
