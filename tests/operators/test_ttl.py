"""State time-to-live (issue 34, item 5): ``ttl=N`` on ``aggregate`` and ``stateful``.

A generator makes ever-new keys every epoch (three a batch, never seen again) and
three kinds of recurring key: ``r`` keys back every seventh epoch, ``q`` keys every
fourth, ``p`` keys every fifth. With ``ttl=5`` a new key leaves the state five epochs
after its only change, an ``r`` key between its visits (it comes back afresh), a
``q`` key never, and a ``p`` key neither: it is back in the very epoch it would
expire (the epoch's own keys are never expired). Over
150 epochs the whole output, the expired rows and the state read back equal a
plain-Python run of the same rule, and the state stays flat: the rows its runs hold
(tombstones included) do not grow with the epochs. A restart in the middle (a new
engine on the same root, from the checkpoints) expires the same keys in the same
epochs. A ``stateful`` function's state expires by the same rule (a shorter run),
and a changed ttl is refused without an upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

from falkirk import read_state
from falkirk.graph import (
    EagerCheckpoint,
    GraphError,
    LazyCheckpoint,
    Pipeline,
    PipelineChangedError,
)
from falkirk.io import MemorySink
from falkirk.io.generators import GeneratorSource
from falkirk.runtime import Engine
from falkirk.spark.state import KeyedState

pytestmark = pytest.mark.slow

EPOCHS = 150
TTL = 5
NEW_PER_EPOCH = 3
#: Recurring keys: r0..r6 each back every 7th epoch (> TTL), q0..q3 every 4th (< TTL),
#: p0..p4 every 5th (= TTL: back in the very epoch they would expire, so they stay).
R, Q, P = 7, 4, 5


def batch_rows(epoch: int) -> list[tuple[str, int]]:
    """Epoch ``epoch``'s rows (key, value): three new keys, an r, a q and a p key."""
    b = epoch - 1
    new = [(f"n{b}_{i}", b + i) for i in range(NEW_PER_EPOCH)]
    return [*new, (f"r{b % R}", b + NEW_PER_EPOCH), (f"q{b % Q}", b + NEW_PER_EPOCH + 1), (f"p{b % P}", b + NEW_PER_EPOCH + 2)]


def generate(spark: SparkSession, batch: int) -> DataFrame:
    return spark.range(NEW_PER_EPOCH + 3).selectExpr(
        f"CASE WHEN id < {NEW_PER_EPOCH} THEN concat('n{batch}_', id) WHEN id = {NEW_PER_EPOCH} THEN 'r{batch % R}' "
        f"WHEN id = {NEW_PER_EPOCH + 1} THEN 'q{batch % Q}' ELSE 'p{batch % P}' END AS k",
        f"CAST(id + {batch} AS bigint) AS v",
    )


@dataclass
class Reference:
    """The rule in plain Python: per key (count, sum, last epoch changed)."""

    ttl: int
    state: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    out: list[tuple[Any, ...]] = field(default_factory=list)
    expired: list[tuple[Any, ...]] = field(default_factory=list)
    live: dict[int, set[str]] = field(default_factory=dict)

    def run(self, epochs: int) -> Reference:
        for e in range(1, epochs + 1):
            rows = batch_rows(e)
            touched = {k for k, _ in rows}
            for k, (n, s, last) in sorted(self.state.items()):
                if last == e - self.ttl and k not in touched:
                    self.expired.append((k, n, s, e))
                    del self.state[k]
            for k, v in rows:
                n, s, _ = self.state.get(k, (0, 0, 0))
                self.state[k] = (n + 1, s + v, e)
            self.out += [(k, *self.state[k][:2], e) for k in sorted(touched)]
            self.live[e] = set(self.state)
        return self


def tally(key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    total = int(rows["v"].sum()) + (int(state["total"].iloc[0]) if len(state) else 0)
    return pd.DataFrame({"k": [str(key)], "total": [total]}), pd.DataFrame({"total": [total]})


@dataclass
class Sinks:
    out: MemorySink = field(default_factory=MemorySink)
    expired: MemorySink = field(default_factory=MemorySink)
    totals: MemorySink = field(default_factory=MemorySink)
    totals_expired: MemorySink = field(default_factory=MemorySink)


def pipeline(kind: str, epochs: int, sinks: Sinks, ttl: int = TTL) -> Pipeline:
    """Generator -> exchange -> ``counts`` (an aggregate, eager checkpoints) or
    ``totals`` (a stateful function, lazy checkpoints), both outputs to memory."""
    p = Pipeline("ttl")
    rows = p.source("gen", GeneratorSource("k string, v long", epochs, generate, NEW_PER_EPOCH + 3)).exchange("by_k", "k")
    if kind == "aggregate":
        counts = rows.aggregate("counts", "k", {"n": ("count", None), "s": ("sum", "v")}, policy=EagerCheckpoint(compact_every=8), ttl=ttl)
        counts.sink("out", sinks.out)
        counts.expired().sink("expired_out", sinks.expired)
    else:
        totals = rows.stateful("totals", "k", tally, state_schema="total long", output_schema="k string, total long", policy=LazyCheckpoint(every=4), ttl=ttl)
        totals.sink("totals_out", sinks.totals)
        totals.expired().sink("totals_expired_out", sinks.totals_expired)
    return p


def rows_of(sink: MemorySink, *columns: str) -> list[tuple[Any, ...]]:
    return sorted((*(r[c] for c in columns), e) for e, rows in sink.epochs.items() for r in rows)


def held_rows(engine: Engine) -> int:
    """Rows the ``counts`` state's runs hold (live, superseded and tombstones)."""
    state = engine.state.operators["counts"].state
    assert isinstance(state, KeyedState)
    return sum(run.count() for run in state.held_runs())


def test_an_aggregates_keys_expire_exactly_and_its_state_stays_flat(spark: SparkSession, tmp_path: Path) -> None:
    want = Reference(TTL).run(EPOCHS)
    sinks, sizes = Sinks(), []
    for upto in (80, None):  # a restart from the checkpoints in the middle
        engine = Engine(pipeline("aggregate", EPOCHS, sinks), tmp_path / "state", spark=spark)
        engine.on_epoch = lambda epoch, *_, engine=engine: sizes.append(held_rows(engine)) if epoch % 10 == 0 else None
        engine.run(max_epochs=upto)
    assert rows_of(sinks.out, "k", "n", "s") == sorted(want.out)
    assert rows_of(sinks.expired, "k", "n", "s") == sorted(want.expired)
    # The scenario (of the reference): new and r keys expire; q and p keys, back
    # within the ttl or in the epoch it ends, never.
    assert {k[0] for k, *_ in want.expired} == {"n", "r"}
    got = read_state(spark, str(tmp_path / "state"), "counts")
    assert sorted(map(tuple, got.collect())) == sorted((k, n, s) for k, (n, s, _) in want.state.items())
    # Flat: the rows held (live, superseded, tombstones) do not grow with the epochs.
    assert len(sizes) >= 12 and max(sizes[len(sizes) // 2 :]) <= max(sizes[: len(sizes) // 2]), sizes


def test_a_stateful_functions_keys_expire_by_the_same_rule(spark: SparkSession, tmp_path: Path) -> None:
    epochs = 24
    want = Reference(TTL).run(epochs)
    sinks = Sinks()
    for upto in (10, None):  # lazy checkpoints every 4: the restart replays epochs 9-10
        Engine(pipeline("stateful", epochs, sinks), tmp_path / "state", spark=spark).run(max_epochs=upto)
    assert rows_of(sinks.totals, "k", "total") == sorted((k, s, e) for k, _, s, e in want.out)
    assert rows_of(sinks.totals_expired, "k", "total") == sorted((k, s, e) for k, _, s, e in want.expired)
    assert {k[0] for k, *_ in want.expired} == {"n", "r"}


def test_a_changed_ttl_is_an_upgrade(spark: SparkSession, tmp_path: Path) -> None:
    """A restart that replays committed epochs must expire what they expired: a
    changed ttl is refused without an upgrade (naming the setting)."""
    sinks = Sinks()
    Engine(pipeline("aggregate", 3, sinks), tmp_path / "state", spark=spark).run()
    with pytest.raises(PipelineChangedError, match="setting 'ttl' was 5, is now 2"):
        Engine(pipeline("aggregate", 3, sinks, ttl=2), tmp_path / "state", spark=spark).run()


def test_ttl_is_a_positive_number_of_epochs_and_expired_needs_one(spark: SparkSession) -> None:
    p = Pipeline("bad")
    rows = p.source("gen", GeneratorSource("k string, v long", 3, generate, 4))
    with pytest.raises(GraphError, match="ttl must be a positive number of epochs"):
        rows.aggregate("a", "k", {"n": ("count", None)}, ttl=0)
    plain = rows.aggregate("b", "k", {"n": ("count", None)})
    with pytest.raises(GraphError, match="has no time-to-live"):
        plain.expired()
