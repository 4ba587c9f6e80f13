"""The protocol every operator implements, and what the engine hands it.

An operator is the runtime half of one processor: the engine calls

1. :meth:`Operator.set_up` once, with the schemas of its inputs (on empty
   DataFrames, before anything runs): it returns its output schemas and creates its
   state - so a pipeline is checked whole before the first epoch;
2. :meth:`Operator.start` once storage is open (a sink prepares its table);
3. :meth:`Operator.step` for every epoch, with the epoch's input DataFrames, in
   epoch order per processor. A keyed operator runs it in two halves: whatever does
   not depend on its state (reading, shuffling and sorting the epoch's rows) first,
   then :attr:`Step.wait_previous` - the processor's previous epoch has been merged -
   then the merge into its state. Epochs overlap, yet apply to state in order;
4. :meth:`Operator.emit` after the step: a sink writes the epoch and returns the
   files to commit;
5. for keyed operators, :meth:`Operator.checkpoint` when the policy asks (the rows to
   persist, written by the engine), :meth:`Operator.restore` and :meth:`Operator.reset`
   on recovery, :meth:`Operator.release` once an epoch has committed.

A keyed operator also says, after :meth:`Operator.set_up`, what its stored state
means (:meth:`Operator.state_signature`): a restart whose state would mean something
else is refused before it reads any (:mod:`falkirk.execution.changes`).

What the policy persists besides (logged outputs, logged inputs for
:class:`~falkirk.graph.FullHistory`) and all metadata are the engine's: an operator
only says what its state is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from falkirk.graph import GraphError, Processor
from falkirk.graph.signatures import StateSignature
from falkirk.graph.specs import OperatorSpec
from falkirk.operators.exceptions import OperatorInvariantError
from falkirk.recovery.chain import Base, ChainKind, Delta
from falkirk.storage import StoredFile
from falkirk.time import Time
from falkirk.time.ticks import Tick

#: A keyed-state checkpoint chain: (version, kind, files), oldest first (a version is
#: the epoch outside loops, the ordinal of a tick inside one; the kind as persisted,
#: ``"base"``, ``"delta"`` or ``"cec:T"``: read it with
#: :class:`~falkirk.recovery.chain.ChainKind`, walk the chain with
#: :func:`~falkirk.recovery.chain.entries_to_restore`).
Chain = Sequence[tuple[int, str, Sequence[StoredFile]]]


def _no_wait() -> None:
    return None


def _keep(df: DataFrame) -> DataFrame:
    return df


@dataclass
class Step:
    """One epoch of one processor, as the engine hands it to :meth:`Operator.step`."""

    epoch: int
    inputs: list[DataFrame]
    #: A source's offsets for the epoch (None: nothing new from it).
    offsets: dict[str, Any] | None = None
    #: Blocks until the processor's previous epoch has been merged into its state
    #: (raises if that epoch failed). Keyed operators call it before their merge.
    wait_previous: Callable[[], None] = _no_wait
    #: Keeps a DataFrame computed once for this epoch (freed when it commits).
    cache: Callable[[DataFrame], DataFrame] = field(default=_keep)
    #: The step's logical time: the epoch, or ``(epoch, iteration)`` inside a loop
    #: (``(epoch, record)`` in a sequence-number region).
    time: Time | None = None
    #: The version a keyed operator gives the state this step writes: grows with
    #: ``time`` (:attr:`falkirk.time.ticks.Tick.ordinal`; the epoch outside loops).
    version: int = -1
    #: The epoch ends the input (``Engine.run(finish=True)``): it has no input rows,
    #: and operators that hold results back (windows) emit them all.
    final: bool = False

    def __post_init__(self) -> None:
        if self.time is None:
            self.time = self.epoch
        if self.version < 0:
            self.version = Tick.of_time(self.time).ordinal


class Operator:
    """Base of every operator (see the module docstring); subclasses set ``spec_type``."""

    spec_type: ClassVar[type[OperatorSpec]] = OperatorSpec

    def __init__(self, processor: Processor, spark: SparkSession) -> None:
        if not isinstance(processor.spec, self.spec_type):
            raise OperatorInvariantError(f"{type(self).__name__} runs {self.spec_type.__name__}, got {processor.spec!r}")
        self.processor = processor
        self.spark = spark
        self.name = processor.name
        #: The identity of the storage root the pipeline runs on: what names its
        #: external writes (set by the engine once it holds the root; see
        #: :mod:`falkirk.storage.identity`).
        self.pipeline = ""

    # -- before anything runs --------------------------------------------------------

    def set_up(self, inputs: Sequence[StructType]) -> dict[str, StructType]:
        """The output schema of every port, given the input schemas; creates state.
        Raise :class:`GraphError` (or let Spark's analysis error through: the engine
        names the processor) when the inputs do not fit."""
        raise NotImplementedError

    def start(self) -> None:
        """Called once storage is open, before the first epoch (a sink prepares)."""

    def stop(self) -> None:
        """Called when the run ends, however it ends (a sink lets its lease go)."""

    def load_state(self, rows: DataFrame, epoch: int) -> None:
        """Replace the state by ``rows`` (its key and state columns, one row per key)
        as of ``epoch``: an upgrade's ``initial_state=``. Only an operator whose
        state columns are the user's supports it."""
        raise GraphError(f"processor {self.name!r} ({self.processor.kind}) cannot start from a given state")

    def carry_over(self, rows: DataFrame) -> DataFrame:
        """``rows`` of a base checkpoint written by the pipeline's previous version
        (its state columns mapped already), as this operator writes them: an
        operator whose files record its own settings updates them."""
        return rows

    def wait_restored(self) -> None:
        """Return once the state a restore loads in the background is loaded (and
        raise what loading it raised); most operators restore at once."""

    # -- an epoch ----------------------------------------------------------------------

    def step(self, step: Step) -> dict[str, DataFrame]:
        """The epoch's output per port."""
        raise NotImplementedError

    def emit(self, step: Step) -> list[StoredFile] | None:
        """Write the epoch to the outside world (sinks): the files to commit, or None
        for an operator with no external output."""
        return None

    # -- the edges: sources and sinks ---------------------------------------------------

    def acknowledge(self, offsets: list[dict[str, Any]]) -> None:
        """Sources: input of these offsets (epochs in order) is never read again."""

    def publish_output(self, upto: int) -> None:
        """Sinks: epochs up to ``upto`` are committed (a sink that shows committed
        epochs makes them visible)."""

    def release_output(self, upto: int) -> None:
        """Sinks: output of epochs up to ``upto`` can no longer be retracted."""

    def abort_output(self, after: int) -> None:
        """Sinks: epochs after ``after`` are rolled back (they will be written again)."""

    # -- keyed state (spec.keyed) -------------------------------------------------------

    def state_signature(self) -> StateSignature | None:
        """After :meth:`set_up`: what the rows of this operator's stored state mean
        (keys, functions, columns, settings; see :mod:`falkirk.graph.signatures`),
        None for an operator without keyed state. State recorded under another
        signature is not read: the restart is refused."""
        return None

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        """The rows of a checkpoint of the state after ``epoch``: all of it (``base``)
        or what changed since the previous checkpoint. Called after the epoch's
        step, before the next one's merge; the rows stay readable until ``epoch``
        commits (they are written while later epochs go on)."""
        raise OperatorInvariantError(f"processor {self.name!r} ({self.processor.kind}) has no state to checkpoint")

    @property
    def owner(self) -> str:
        """How errors about this operator's stored state name it."""
        return f"processor {self.name!r} ({self.processor.kind})"

    def chain_kind(self, epoch: int, base: bool) -> ChainKind:
        """How the checkpoint of ``epoch`` just taken is recorded in the chain:
        :class:`~falkirk.recovery.chain.Base` (restorable alone) or
        :class:`~falkirk.recovery.chain.Delta` (needs the base before it); an
        operator with a log of its own may say more (:class:`~falkirk.recovery.chain.Cec`:
        needs the entries from epoch T on). The engine persists ``str()`` of it."""
        return Base() if base else Delta()

    def restore(self, chain: Chain, epoch: int) -> None:
        """Load the state as of checkpoint ``epoch`` from its committed chain (files
        already verified)."""
        raise OperatorInvariantError(f"processor {self.name!r} ({self.processor.kind}) has no state to restore")

    def catch_up_from(self) -> int | None:
        """After :meth:`restore`: the epoch after which the restored state still
        lacks input (the engine replays the processor's own input log of the later
        epochs, up to the restored one, through :meth:`catch_up`); None: none."""
        return None

    def catch_up(self, step: Step) -> None:
        """Take a replayed epoch of input into the restored state (emits nothing)."""
        raise OperatorInvariantError(f"processor {self.name!r} ({self.processor.kind}) does not catch up")

    def revert(self, epoch: int, checkpointed: int) -> bool:
        """Forget, in memory, what steps of epochs after ``epoch`` (discarded, never
        committed) changed in the state; ``checkpointed``: the epoch of the last
        committed checkpoint. False if it cannot (the default): the processor is then
        restored from checkpoints instead."""
        return False

    def trial(self) -> Operator | None:
        """A stand-in for this operator whose :meth:`step` leaves no trace here, to try
        the epoch's step on part of its input (:mod:`falkirk.execution.isolation`);
        :meth:`end_trial` on it frees what the try kept. A stateless operator is its
        own stand-in; None: it cannot try (its bad rows stop the run)."""
        return None if self.processor.spec.keyed else self

    def end_trial(self) -> None:
        """Free what a step of this stand-in (:meth:`trial`) kept."""

    def held(self) -> list[DataFrame] | None:
        """The materialised DataFrames that hold this operator's state in the
        executors (checked for lost blocks after an executor loss), or None if it
        cannot say: then every executor loss rolls it back."""
        return None

    def reset(self) -> None:
        """Back to the initial, empty state."""

    def release(self, committed: int) -> None:
        """Free what epochs up to ``committed`` needed (they have committed)."""


def call_map(fn: Callable[..., Any], df: DataFrame, epoch: int) -> DataFrame:
    """``fn(df)`` or ``fn(df, epoch)``, whichever it accepts."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
    result = fn(df, epoch) if len(params) >= 2 else fn(df)
    if not isinstance(result, DataFrame):
        raise GraphError(f"a map/validate function must return a DataFrame, got {type(result).__name__}")
    return result


def require(schema: StructType, columns: Sequence[str], where: str = "its input") -> None:
    """Raise :class:`GraphError` unless ``schema`` has all ``columns``."""
    missing = [c for c in columns if c not in schema.fieldNames()]
    if missing:
        raise GraphError(f"columns {missing} are not in {where} (columns: {schema.fieldNames()})")


def state_columns(schema: StructType, prefix: str = "") -> tuple[tuple[str, str], ...]:
    """A state's columns as a :class:`StateSignature` has them: (name, type)."""
    return tuple((prefix + f.name, f.dataType.simpleString()) for f in schema.fields)


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame with ``schema`` (for schema checks; made in Python)."""
    return spark.createDataFrame([], schema)
