"""Operators whose state is one row per key (:class:`~falkirk.spark.state.KeyedState`):
checkpoints, restore and release are the state's own."""

from __future__ import annotations

import copy
from typing import ClassVar

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from falkirk.graph import GraphError, Processor
from falkirk.operators.base import Chain, Operator
from falkirk.spark.state import KeyedState


def ttl_setting(ttl: int | str | None) -> dict[str, object]:
    """A time-to-live as a setting of the state's signature (none without one, so
    roots written before ttls existed keep their signatures): which keys the
    committed outputs expired depends on it, so a restart that replays committed
    epochs must use the same one, and a change is an upgrade (from a savepoint at
    the last committed epoch: nothing replayed)."""
    return {} if ttl is None else {"ttl": ttl}


def check_ttl_scope(processor: Processor) -> None:
    """A time-to-live counts epochs: refused inside a loop or a sequence-number
    region, whose processors advance by iterations or records within an epoch."""
    if getattr(processor.spec, "ttl", None) is not None and (processor.loop is not None or processor.region is not None):
        raise GraphError(
            f"processor {processor.name!r}: ttl counts epochs, and inside a loop or a sequence region time moves by "
            "iterations or records; drop ttl=, or keep the processor outside the loop"
        )


class KeyedOperator(Operator):
    """An operator holding one :class:`~falkirk.spark.state.KeyedState` (``self.state``)."""

    #: Its state is its KeyedState alone, so a stand-in with a scratch copy of it can
    #: try a step (:meth:`trial`).
    trial_safe: ClassVar[bool] = False

    def trial(self) -> KeyedOperator | None:
        """A copy working on a scratch copy of the state (:meth:`KeyedState.scratch`)."""
        if not self.trial_safe or self.processor.region is not None:
            return None
        twin = copy.copy(self)
        twin.state = self.state.scratch()
        return twin

    def end_trial(self) -> None:
        self.state.drop_scratch()

    def make_state(self, keys: tuple[str, ...], schema: StructType) -> None:
        self.state = KeyedState(self.spark, keys, schema, keep_tombstones=self.processor.policy.writes_checkpoints)

    def checkpoint(self, epoch: int, base: bool) -> DataFrame:
        return self.state.checkpoint(epoch, base)

    def restore(self, chain: Chain, epoch: int) -> None:
        self.state.restore(chain, epoch, self.owner)

    def load_state(self, rows: DataFrame, epoch: int) -> None:
        self.state.load(rows, epoch)

    def wait_restored(self) -> None:
        self.state.base  # noqa: B018 - the first use of the runs waits for the restore

    def revert(self, epoch: int, checkpointed: int) -> bool:
        """Its state is its :class:`KeyedState` alone (subclasses holding more say
        False)."""
        return self.state.revert(epoch, checkpointed)

    def held(self) -> list[DataFrame] | None:
        return self.state.held_runs()

    def reset(self) -> None:
        self.state.reset()

    def release(self, committed: int) -> None:
        self.state.release(committed)
