"""Streams: the output of a processor, and the builders that add the next processor
on it (:meth:`Stream.map`, :meth:`Stream.join`, :meth:`Stream.window`, ...). Each
builder checks its arguments, makes the operator's spec and hands it to the
pipeline (:meth:`falkirk.graph.Pipeline.add`), which checks the graph."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from falkirk.graph.durations import span
from falkirk.graph.errors import ERRORS_PORT, OnError
from falkirk.graph.exceptions import GraphError
from falkirk.graph.plugins import Sink, TransactionalSink
from falkirk.graph.policies import Policy
from falkirk.graph.specs import (
    EXPIRED_PORT,
    AggregateSpec,
    BufferSpec,
    ExchangeSpec,
    JoinSpec,
    LookupSpec,
    MapSpec,
    OperatorSpec,
    SinkSpec,
    StatefulSpec,
    UnionSpec,
    ValidateSpec,
    keys,
)
from falkirk.graph.windows import EventTimeTtl, WindowShape, WindowSpec


class Graph(Protocol):
    """What a stream needs of its :class:`~falkirk.graph.Pipeline`."""

    def add(
        self, name: str, spec: OperatorSpec, inputs: Sequence[Stream], policy: Policy | None, on_error: OnError | str | None = None
    ) -> Stream: ...

    def spec_of(self, processor: str) -> OperatorSpec | None: ...


@dataclass(frozen=True)
class Stream:
    """The output ``port`` of processor ``processor``: what the next step consumes."""

    pipeline: Graph
    processor: str
    port: str = "out"

    def apply(
        self, name: str, spec: OperatorSpec, *others: Stream, policy: Policy | None = None, on_error: OnError | str | None = None
    ) -> Stream:
        """Add processor ``name`` running ``spec`` on this stream (and ``others``, its
        further inputs, in order); returns its first output. Every builder below is a
        shorthand for this; operators of your own are added with it.

        ``on_error`` (every builder takes it): ``"dead_letter"`` or ``"stop"``, what
        the processor does with rows it cannot process; None: the pipeline's (see
        :mod:`falkirk.graph.errors` and :meth:`errors`)."""
        return self.pipeline.add(name, spec, [self, *others], policy, on_error)

    def _build(
        self,
        name: str,
        make: Callable[[], OperatorSpec],
        *others: Stream,
        policy: Policy | None = None,
        on_error: OnError | str | None = None,
    ) -> Stream:
        """:meth:`apply` with the spec ``make()`` returns; a :class:`GraphError` in
        the builder's arguments names the processor."""
        try:
            spec = make()
        except GraphError as exc:
            raise GraphError(f"processor {name!r}: {exc}") from exc
        return self.apply(name, spec, *others, policy=policy, on_error=on_error)

    def errors(self) -> Stream:
        """The rows this stream's processor could not process (``on_error=
        "dead_letter"``, the default): each with the processor's input columns, then
        ``processor``, ``epoch`` and ``reason`` (the error's text). Connect a sink to
        keep them; unconnected, they go to the storage root's quarantine table. See
        :mod:`falkirk.graph.errors`."""
        p = self.pipeline.processors.get(self.processor)  # type: ignore[attr-defined]
        if p is None or not p.has_errors:
            raise GraphError(f"errors(): {self.processor!r} has no errors output (sources and sinks have none)")
        return Stream(self.pipeline, self.processor, ERRORS_PORT)

    def map(self, name: str, fn: Callable[..., Any], *, policy: Policy | None = None, on_error: OnError | str | None = None) -> Stream:
        """A stateless transform ``fn(df) -> df`` (filters, projections, explode...).

        ``fn`` may take a second argument, the epoch number."""
        return self.apply(name, MapSpec(fn=fn), policy=policy, on_error=on_error)

    def validate(
        self, name: str, fn: Callable[[Any], Any], *, policy: Policy | None = None, on_error: OnError | str | None = None
    ) -> tuple[Stream, Stream]:
        """Split rows with ``fn(df) -> df`` returning the rows plus a string column
        ``reason``: null for valid rows (sent on the first stream, without
        ``reason``), the reason otherwise (second stream, for a dead-letter sink)."""
        self.apply(name, ValidateSpec(fn=fn), policy=policy, on_error=on_error)
        return Stream(self.pipeline, name, "valid"), Stream(self.pipeline, name, "rejected")

    def exchange(self, name: str, key: str | Sequence[str], *, policy: Policy | None = None, on_error: OnError | str | None = None) -> Stream:
        """Repartition rows by ``key`` (a processor boundary: rows of one key meet)."""
        return self.apply(name, ExchangeSpec(key=keys(name, key)), policy=policy, on_error=on_error)

    def aggregate(
        self,
        name: str,
        key: str | Sequence[str],
        aggregates: Mapping[str, tuple[str, str | None]],
        *,
        policy: Policy | None = None,
        on_error: OnError | str | None = None,
        ttl: int | None = None,
    ) -> Stream:
        """Running aggregates per key: ``{"out_col": (func, in_col)}`` with func one of
        count (in_col may be None), sum, min, max, avg, first, last. Each epoch emits,
        for the keys it touched, the key, the updated aggregates and nothing else.

        ``ttl=N`` (epochs): a key no epoch changed for N epochs leaves the state at the
        end of the N-th such epoch - a key last changed in epoch e is gone after epoch
        e + N, and rows of it in a later epoch start afresh. Its last aggregates go
        to the :meth:`expired` output in that epoch (connect it to keep them). The
        rule depends only on epoch numbers, so a replay after a crash expires the
        same keys in the same epochs; checkpoints record the removals. Giving,
        changing or dropping ``ttl`` is an upgrade (a savepoint at the last
        committed epoch, then ``upgrade=True``): a replay of committed epochs must
        expire what they expired. Keys already older than a new ``ttl`` leave at the
        upgrade's first epoch."""
        return self._build(
            name, lambda: AggregateSpec(key=keys(name, key), aggregates=dict(aggregates), ttl=ttl), policy=policy, on_error=on_error
        )

    def stateful(
        self,
        name: str,
        key: str | Sequence[str],
        fn: Callable[..., Any],
        *,
        state_schema: str,
        output_schema: str,
        policy: Policy | None = None,
        on_error: OnError | str | None = None,
        on_epoch_end: Callable[..., Any] | None = None,
        vectorized: bool = False,
        ttl: int | None = None,
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
        that may exceed that (ids) free of nulls - e.g. a sentinel such as -1.

        ``ttl=N`` (epochs): a key whose state no epoch changed for N epochs leaves the
        state, its last state going to the :meth:`expired` output (key and state
        columns), as :meth:`aggregate`'s ``ttl`` says. A key ``on_epoch_end`` keeps
        state for is changed each epoch and never expires."""
        def spec() -> StatefulSpec:
            return StatefulSpec(
                key=keys(name, key),
                fn=fn,
                state_schema=state_schema,
                output_schema=output_schema,
                on_epoch_end=on_epoch_end,
                vectorized=vectorized,
                ttl=ttl,
            )

        return self._build(name, spec, policy=policy, on_error=on_error)

    def union(self, name: str, *others: Stream, policy: Policy | None = None, on_error: OnError | str | None = None) -> Stream:
        """The rows of this stream and of ``others`` (all with the same columns and
        types, in any order): one stream."""
        return self.apply(name, UnionSpec(), *others, policy=policy, on_error=on_error)

    def join(
        self,
        name: str,
        other: Stream,
        on: str | Sequence[str],
        *,
        how: str = "inner",
        retain: int | None = None,
        policy: Policy | None = None,
        on_error: OnError | str | None = None,
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
        return self._build(name, lambda: JoinSpec(on=keys(name, on), how=how, retain=retain), other, policy=policy, on_error=on_error)

    def lookup(
        self, name: str, table: Stream, on: str | Sequence[str], *, how: str = "left", policy: Policy | None = None,
        on_error: OnError | str | None = None,
    ) -> Stream:
        """Each row of this stream with the current version of a keyed table that
        another part of the pipeline maintains: ``table`` is a stream of upserts (each
        row the new version of its key; for example an aggregate's output, or a batch
        computation re-run every N epochs). A row of epoch e sees the table as of the
        end of epoch e. Output: this stream's columns, then the table's other columns
        (null when the key has no version yet; ``how="inner"`` drops such rows). If
        an epoch has several rows for one key, the greatest of them (comparing all
        columns) is the new version."""
        return self._build(name, lambda: LookupSpec(on=keys(name, on), how=how), table, policy=policy, on_error=on_error)

    def window(
        self,
        name: str,
        key: str | Sequence[str],
        time: str,
        shape: WindowShape,
        aggregates: Mapping[str, tuple[str, str | None]] | None = None,
        *,
        watermark_delay: int | str | timedelta = 0,
        mode: str = "append",
        fn: Callable[..., Any] | None = None,
        output_schema: str = "",
        ttl: int | str | timedelta | EventTimeTtl | None = None,
        policy: Policy | None = None,
        on_error: OnError | str | None = None,
    ) -> Stream:
        """Aggregates per key and event-time window (:mod:`falkirk.graph.windows`):
        ``{"out_col": (func, in_col)}`` with func one of count (in_col may be None),
        sum, min, max, avg.

        ``time`` is an integer column (any unit: the shape's sizes and
        ``watermark_delay`` are integers in it) or a ``timestamp``/``timestamp_ntz``
        column (sizes and delay are durations: ``Tumbling("10 minutes")``,
        ``watermark_delay="5 minutes"`` or ``timedelta``s; ``window_start`` and
        ``window_end`` are then timestamps of the same type, windows aligned at
        1970-01-01 as Spark's ``window()``).

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
        footprints).

        ``ttl``: a key whose windows stay open while nothing happens to them leaves
        the state with them. ``ttl=N`` (epochs): N epochs in which no row of the key
        arrived and none of its windows closed; ``ttl="2 hours"`` (a duration over a
        timestamp column) or ``EventTimeTtl(N)`` (an integer column's unit): no row
        of the key newer than the watermark minus that. The key's open windows go,
        with their values so far and the columns of ``out``, to ``stream.expired()``
        in the epoch it leaves (never to ``out``); a key with a window closing in
        that epoch stays for it. Not with ContinuousEventualCheckpoint. Changing
        ``ttl`` is an upgrade, as with :meth:`aggregate`."""
        def spec() -> WindowSpec:
            return WindowSpec(
                key=keys(name, key),
                time=time,
                shape=shape,
                aggregates=dict(aggregates or {}),
                watermark_delay=span(watermark_delay, f"window {name!r}: watermark_delay", minimum=0),
                mode=mode,
                fn=fn,
                output_schema=output_schema,
                ttl=ttl,
            )

        return self._build(name, spec, policy=policy, on_error=on_error)

    def expired(self) -> Stream:
        """The keys a keyed processor's ``ttl`` removed from its state, each with its
        last value (see :meth:`aggregate`), in the epoch it expired."""
        spec = self.pipeline.spec_of(self.processor)
        if spec is None or EXPIRED_PORT not in spec.output_ports:
            raise GraphError(f"expired(): {self.processor!r} has no time-to-live; give its aggregate, stateful or window a ttl")
        return Stream(self.pipeline, self.processor, EXPIRED_PORT)

    def late(self) -> Stream:
        """The late rows of a window processor (see :meth:`window`)."""
        if not isinstance(self.pipeline.spec_of(self.processor), WindowSpec):
            raise GraphError(f"late(): {self.processor!r} is not a window processor")
        return Stream(self.pipeline, self.processor, "late")

    def buffer(self, name: str, *, retain: int | None = None, policy: Policy | None = None, on_error: OnError | str | None = None) -> Stream:
        """Keep every row of the stream, partitioned by epoch, and pass the rows on
        (the paper's Buffer, Figure 3); with ``retain=N`` only the last N epochs' rows
        are kept. Its state is partitioned by time, so epochs may reach it in any
        order - later epochs in flight need not wait for earlier ones - and its
        checkpoints are selective: a checkpoint of epoch A holds exactly the rows of
        the epochs up to A, even when rows of a later epoch B have arrived already,
        and a rollback to A restores "all of A, none of B". Inside a loop (without
        ``retain``) its parts are the loop's times ``(epoch, iteration)``, so it may
        sit in a loop built with ``interleave=True``. ``rows()`` on its operator
        gives what it holds."""
        return self._build(name, lambda: BufferSpec(retain=retain), policy=policy, on_error=on_error)

    def sink(self, name: str, sink: Sink | TransactionalSink) -> None:
        """Write the stream to ``sink`` (exactly once per epoch; a
        :class:`~falkirk.graph.TransactionalSink` shows an epoch only once released)."""
        self.apply(name, SinkSpec(writer=sink))
