"""What each kind of processor does, as typed, validated specs.

A :class:`~falkirk.graph.Processor` holds one spec: the operator's parameters, plus
what the engine needs to know of its kind - its output ports, how many inputs it
takes, which policies fit it, whether it keeps keyed state, whether it is a source
or a sink. The code that runs a spec on Spark lives in :mod:`falkirk.operators`
(one module per kind, registered by spec type); this module is pure Python.

A new kind of operator is one module in :mod:`falkirk.operators` holding its spec
(a subclass of :class:`OperatorSpec`) and its implementation, plus one registry
entry; :meth:`falkirk.graph.Stream.apply` adds it to a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from falkirk.graph.exceptions import GraphError
from falkirk.graph.plugins import Sink, Source, TransactionalSink
from falkirk.graph.policies import (
    EagerCheckpoint,
    FullHistory,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)

AGGREGATES = ("count", "sum", "min", "max", "avg", "first", "last")
JOINS = ("inner", "left", "full")
LOOKUPS = ("left", "inner")
ALL_POLICIES: tuple[type[Policy], ...] = (Stateless, LogOutputs, LazyCheckpoint, EagerCheckpoint, FullHistory)


class Structure(Enum):
    """What a translator does to the scope of the rows it passes on (the scope: the
    epochs, a loop, or a sequence-number region). Every other operator's rows stay
    in the scope of what it reads."""

    #: Into a loop: epoch e's rows arrive at (e, 0).
    LOOP_ENTER = "enter"
    #: The loop's back edge: rows sent at (e, i) arrive at (e, i + 1).
    LOOP_FEEDBACK = "feedback"
    #: Out of a loop: every iteration's rows leave as epoch e's.
    LOOP_LEAVE = "leave"
    #: Into a sequence-number region: each record gets its number.
    REGION_NUMBER = "number"
    #: Out of a region: epoch e's rows leave once all its records are through.
    REGION_REGROUP = "regroup"


@dataclass(frozen=True)
class OperatorSpec:
    """Base of every spec. Class attributes describe the kind; fields are parameters.

    What the graph's checks (:mod:`falkirk.graph.scopes`) and the engine's stages
    need to know of a kind is declared here, never recognised by its name:
    ``keyed``, ``selective``, ``source``, ``sink``, ``structure`` (translators),
    ``fits_regions``, and the properties :attr:`translates`,
    :attr:`ages_by_epochs` and :attr:`notifies`."""

    #: The kind's name (also the registry key of its implementation).
    kind: ClassVar[str] = ""
    #: Output ports, the first one being what the builder returns.
    ports: ClassVar[tuple[str, ...]] = ("out",)
    #: Ports that may be left unconnected (their rows are dropped).
    optional_ports: ClassVar[tuple[str, ...]] = ()
    #: Number of inputs (None: two or more).
    arity: ClassVar[int | None] = 1
    #: Names of the inputs, for messages (``arity`` of them, or one pattern).
    input_names: ClassVar[tuple[str, ...]] = ("input",)
    policies: ClassVar[tuple[type[Policy], ...]] = (Stateless, LogOutputs)
    #: Keeps keyed state between epochs (checkpointed by the checkpoint policies).
    keyed: ClassVar[bool] = False
    #: Its state is partitioned by logical time (events of time t touch only t's
    #: part), so it may process epochs interleaved, in any order, and checkpoints
    #: selectively: "all of epoch A, none of B" (section 2.3 and 3.3 of the paper).
    #: Every other keyed operator applies epochs in order.
    selective: ClassVar[bool] = False
    #: Reads external input (has offsets) / writes external output (commits files).
    source: ClassVar[bool] = False
    sink: ClassVar[bool] = False
    #: The translator it is (None: its rows stay in the scope of what it reads).
    structure: ClassVar[Structure | None] = None
    #: Whether it may run inside a sequence-number region, where each record is its
    #: own time (not sources, sinks, or operators that keep rows by epoch).
    fits_regions: ClassVar[bool] = True

    @property
    def output_ports(self) -> tuple[str, ...]:
        """The ports this processor has: :attr:`ports`, and a keyed processor with a
        time-to-live also :data:`EXPIRED_PORT`."""
        return self.ports

    @property
    def translates(self) -> str | None:
        """The loop or region a translator leads into, around or out of (None for
        any other operator)."""
        return None

    @property
    def ages_by_epochs(self) -> bool:
        """Whether its state forgets rows as epochs pass (a join's, a lookup's, a
        buffer's with ``retain``): loops, whose iterations share an epoch, cannot run
        it yet."""
        return False

    @property
    def notifies(self) -> bool:
        """Whether it runs a function at each epoch's end (a notification), which a
        sequence-number region, where each record is its own time, has none of."""
        return False

    def check_arity(self, name: str, inputs: int) -> None:
        if self.arity is None:
            if inputs < 2:
                raise GraphError(f"processor {name!r} ({self.kind}) needs two or more inputs, got {inputs}")
        elif inputs != self.arity:
            raise GraphError(f"processor {name!r} ({self.kind}) takes {self.arity} input(s), got {inputs}")


@dataclass(frozen=True)
class SourceSpec(OperatorSpec):
    """Reads a :class:`~falkirk.graph.Source` epoch by epoch."""

    kind: ClassVar[str] = "source"
    arity: ClassVar[int | None] = 0
    input_names: ClassVar[tuple[str, ...]] = ()
    policies: ClassVar[tuple[type[Policy], ...]] = (Stateless,)
    source: ClassVar[bool] = True
    fits_regions: ClassVar[bool] = False
    reader: Source = field(default=None)  # type: ignore[assignment]


@dataclass(frozen=True)
class MapSpec(OperatorSpec):
    """``fn(df)`` or ``fn(df, epoch)`` -> DataFrame, per epoch."""

    kind: ClassVar[str] = "map"
    fn: Callable[..., Any] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise GraphError(f"map: fn must be a function (df) -> df, got {self.fn!r}")


@dataclass(frozen=True)
class ValidateSpec(OperatorSpec):
    """``fn(df)`` adds a string column ``reason`` (null = valid): two outputs."""

    kind: ClassVar[str] = "validate"
    ports: ClassVar[tuple[str, ...]] = ("valid", "rejected")
    fn: Callable[..., Any] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise GraphError(f"validate: fn must be a function (df) -> df with a reason column, got {self.fn!r}")


@dataclass(frozen=True)
class ExchangeSpec(OperatorSpec):
    """Repartitions rows by ``key``."""

    kind: ClassVar[str] = "exchange"
    key: tuple[str, ...] = ()


#: The output port of the keys a time-to-live removed from a keyed state, each with
#: its last value (an aggregate's values, a ``stateful`` function's state).
EXPIRED_PORT = "expired"


def check_ttl(ttl: object) -> None:
    """A time-to-live is a positive number of epochs, or None."""
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1):
        raise GraphError(f"ttl must be a positive number of epochs (or None: keys never expire), got {ttl!r}")


@dataclass(frozen=True)
class AggregateSpec(OperatorSpec):
    """Running aggregates per key: ``{"out": (func, column)}``."""

    kind: ClassVar[str] = "aggregate"
    policies: ClassVar[tuple[type[Policy], ...]] = ALL_POLICIES
    keyed: ClassVar[bool] = True
    optional_ports: ClassVar[tuple[str, ...]] = ("expired",)
    key: tuple[str, ...] = ()
    aggregates: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)

    #: Time to live in epochs: a key whose state no epoch changed for this many
    #: epochs leaves the state (see :meth:`falkirk.graph.Stream.aggregate`).
    ttl: int | None = None

    @property
    def output_ports(self) -> tuple[str, ...]:
        return (*self.ports, EXPIRED_PORT) if self.ttl is not None else self.ports

    def __post_init__(self) -> None:
        check_ttl(self.ttl)
        if not self.aggregates:
            raise GraphError("aggregate: give at least one aggregate, e.g. {'n': ('count', None)}")
        for out, spec in self.aggregates.items():
            if not isinstance(spec, tuple) or len(spec) != 2 or spec[0] not in AGGREGATES:
                raise GraphError(f"aggregate {out!r} must be (func, column) with func in {AGGREGATES}, got {spec!r}")
            if spec[0] != "count" and spec[1] is None:
                raise GraphError(f"aggregate {out!r} ({spec[0]}) needs a column")


@dataclass(frozen=True)
class StatefulSpec(OperatorSpec):
    """A user function with per-key state (see :meth:`falkirk.graph.Stream.stateful`)."""

    kind: ClassVar[str] = "stateful"
    policies: ClassVar[tuple[type[Policy], ...]] = ALL_POLICIES
    keyed: ClassVar[bool] = True
    key: tuple[str, ...] = ()
    fn: Callable[..., Any] = field(default=None)  # type: ignore[assignment]
    state_schema: str = ""
    output_schema: str = ""
    on_epoch_end: Callable[..., Any] | None = None
    optional_ports: ClassVar[tuple[str, ...]] = ("expired",)

    @property
    def notifies(self) -> bool:
        return self.on_epoch_end is not None
    vectorized: bool = False

    #: Time to live in epochs: a key whose state no epoch changed for this many
    #: epochs leaves the state (see :meth:`falkirk.graph.Stream.aggregate`).
    ttl: int | None = None

    @property
    def output_ports(self) -> tuple[str, ...]:
        return (*self.ports, EXPIRED_PORT) if self.ttl is not None else self.ports

    def __post_init__(self) -> None:
        check_ttl(self.ttl)
        if not callable(self.fn):
            raise GraphError(f"stateful: fn must be a function, got {self.fn!r}")
        if self.vectorized and self.on_epoch_end is not None:
            raise GraphError("on_epoch_end needs the per-key form; drop vectorized=True")
        if self.on_epoch_end is not None and not callable(self.on_epoch_end):
            raise GraphError("on_epoch_end must be a function (key, state, epoch) -> (outputs, new_state)")


@dataclass(frozen=True)
class SinkSpec(OperatorSpec):
    """Writes its input to a :class:`~falkirk.graph.Sink`, exactly once per epoch."""

    kind: ClassVar[str] = "sink"
    ports: ClassVar[tuple[str, ...]] = ()
    policies: ClassVar[tuple[type[Policy], ...]] = (Stateless,)
    sink: ClassVar[bool] = True
    fits_regions: ClassVar[bool] = False
    writer: Sink | TransactionalSink = field(default=None)  # type: ignore[assignment]


@dataclass(frozen=True)
class UnionSpec(OperatorSpec):
    """The rows of two or more streams with the same columns."""

    kind: ClassVar[str] = "union"
    arity: ClassVar[int | None] = None
    input_names: ClassVar[tuple[str, ...]] = ("stream",)


@dataclass(frozen=True)
class JoinSpec(OperatorSpec):
    """A keyed stream-stream equi-join (see :meth:`falkirk.graph.Stream.join`)."""

    kind: ClassVar[str] = "join"
    fits_regions: ClassVar[bool] = False
    arity: ClassVar[int | None] = 2
    input_names: ClassVar[tuple[str, ...]] = ("left", "right")
    policies: ClassVar[tuple[type[Policy], ...]] = ALL_POLICIES
    keyed: ClassVar[bool] = True
    on: tuple[str, ...] = ()
    how: str = "inner"
    retain: int | None = None

    @property
    def ages_by_epochs(self) -> bool:
        return True  # its rows by epoch (a join's retain, a lookup's versions)

    def __post_init__(self) -> None:
        if self.how not in JOINS:
            raise GraphError(f"join: how must be one of {JOINS}, got {self.how!r}")
        if self.retain is not None and (not isinstance(self.retain, int) or self.retain < 1):
            raise GraphError(f"join: retain must be a number of epochs >= 1 (or None: forever), got {self.retain!r}")
        if self.how != "inner" and self.retain is None:
            raise GraphError(
                f"join: a {self.how} join emits a row without a match once it can no longer match; "
                "give retain=N (epochs a row waits for its match)"
            )


@dataclass(frozen=True)
class LookupSpec(OperatorSpec):
    """Each row of a stream with the current version of a keyed table (see
    :meth:`falkirk.graph.Stream.lookup`)."""

    kind: ClassVar[str] = "lookup"
    fits_regions: ClassVar[bool] = False
    arity: ClassVar[int | None] = 2
    input_names: ClassVar[tuple[str, ...]] = ("stream", "table")
    policies: ClassVar[tuple[type[Policy], ...]] = ALL_POLICIES
    keyed: ClassVar[bool] = True
    on: tuple[str, ...] = ()
    how: str = "left"

    @property
    def ages_by_epochs(self) -> bool:
        return True  # its rows by epoch (a join's retain, a lookup's versions)

    def __post_init__(self) -> None:
        if self.how not in LOOKUPS:
            raise GraphError(f"lookup: how must be one of {LOOKUPS}, got {self.how!r}")


def keys(name: str, key: str | Sequence[str]) -> tuple[str, ...]:
    """Key columns from a name or a list of names (validated)."""
    found = (key,) if isinstance(key, str) else tuple(key)
    if not found or not all(isinstance(k, str) and k for k in found):
        raise GraphError(f"processor {name!r}: key must be a column name or a list of them, got {key!r}")
    return found


# -- loops (see falkirk.graph.loops) ----------------------------------------------------

#: Policies a processor inside a loop may use: its times are (epoch, iteration).
LOOP_POLICIES: tuple[type[Policy], ...] = (Stateless, LogOutputs, LazyCheckpoint, EagerCheckpoint)


@dataclass(frozen=True)
class EnterSpec(OperatorSpec):
    """Brings an epoch stream into loop ``loop``: epoch e's rows arrive at ``(e, 0)``."""

    kind: ClassVar[str] = "enter"
    structure: ClassVar[Structure | None] = Structure.LOOP_ENTER
    loop: str = ""

    @property
    def translates(self) -> str | None:
        return self.loop


@dataclass(frozen=True)
class FeedbackSpec(OperatorSpec):
    """The back edge of loop ``loop``: the rows its input sends at ``(e, i)`` are
    delivered at ``(e, i + 1)``. ``schema`` (a DDL string) is the rows' schema: the
    feedback is read before its input is defined."""

    kind: ClassVar[str] = "feedback"
    structure: ClassVar[Structure | None] = Structure.LOOP_FEEDBACK
    loop: str = ""
    schema: str = ""

    @property
    def translates(self) -> str | None:
        return self.loop

    def __post_init__(self) -> None:
        if not isinstance(self.schema, str) or not self.schema.strip():
            raise GraphError("feedback: give the rows' schema as a DDL string, e.g. 'vertex long, label long'")


@dataclass(frozen=True)
class LeaveSpec(OperatorSpec):
    """Takes a stream out of loop ``loop``: the rows of every iteration of epoch e
    leave as rows of epoch e, once the epoch's iterations are over."""

    kind: ClassVar[str] = "leave"
    structure: ClassVar[Structure | None] = Structure.LOOP_LEAVE
    loop: str = ""

    @property
    def translates(self) -> str | None:
        return self.loop


#: What processors inside a sequence-number region may use (keyed ones: eager only).
SEQUENCE_POLICIES: tuple[type[Policy], ...] = (Stateless, LogOutputs, EagerCheckpoint)


@dataclass(frozen=True)
class NumberSpec(OperatorSpec):
    """Numbers an epoch stream into sequence-number region ``sequence`` (the
    translator from epochs to sequence numbers; its output is always logged)."""

    kind: ClassVar[str] = "number"
    structure: ClassVar[Structure | None] = Structure.REGION_NUMBER
    policies: ClassVar[tuple[type[Policy], ...]] = (LogOutputs,)
    sequence: str = ""

    @property
    def translates(self) -> str | None:
        return self.sequence


@dataclass(frozen=True)
class RegroupSpec(OperatorSpec):
    """Takes a stream out of sequence-number region ``sequence``: epoch e's rows
    leave once all of its records are through (the translator back to epochs)."""

    kind: ClassVar[str] = "regroup"
    structure: ClassVar[Structure | None] = Structure.REGION_REGROUP
    policies: ClassVar[tuple[type[Policy], ...]] = (Stateless,)
    sequence: str = ""

    @property
    def translates(self) -> str | None:
        return self.sequence


@dataclass(frozen=True)
class BufferSpec(OperatorSpec):
    """Keeps every row it receives, partitioned by epoch (the paper's Buffer), and
    passes them on; ``retain`` epochs of them, or all (see
    :meth:`falkirk.graph.Stream.buffer`)."""

    kind: ClassVar[str] = "buffer"
    fits_regions: ClassVar[bool] = False
    policies: ClassVar[tuple[type[Policy], ...]] = (Stateless, LazyCheckpoint, EagerCheckpoint)
    keyed: ClassVar[bool] = True
    selective: ClassVar[bool] = True
    retain: int | None = None

    def __post_init__(self) -> None:
        if self.retain is not None and (isinstance(self.retain, bool) or not isinstance(self.retain, int) or self.retain < 1):
            raise GraphError(f"buffer: retain must be a number of epochs >= 1 (or None: all), got {self.retain!r}")

    @property
    def ages_by_epochs(self) -> bool:
        return self.retain is not None
