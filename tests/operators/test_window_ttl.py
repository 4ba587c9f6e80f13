"""A window's time-to-live (issue 34, item 5): ``window(..., ttl=N)`` in epochs and
``ttl=EventTimeTtl(span)`` on event time.

Rows of epoch e have event time ``10 e`` (an integer column) and fall in tumbling
windows of 200, so windows close at epoch 21 (and every twentieth after), and a key's window is
otherwise open for up to twenty epochs. Every epoch brings two new keys (never seen
again), an ``r`` key back every sixth epoch and a ``q`` key every second. With
``ttl=4`` a key leaves four epochs after its state last changed - a row, or a window
of it closed - unless it has a window closing in that epoch; with an event-time ttl
of 35, once the watermark windows close at is 35 past its latest row. A plain-Python
run of the rules gives every closed window (``out``), every expired one
(``expired()``, with its values so far) and the windows open at the end
(``read_state``); the engine's equal it whole, across a restart from checkpoints in
the middle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from falkirk import read_state
from falkirk.graph import (
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    EventTimeTtl,
    GraphError,
    LazyCheckpoint,
    Pipeline,
    PipelineChangedError,
    Policy,
    Tumbling,
)
from falkirk.io import MemorySink
from falkirk.io.generators import GeneratorSource
from falkirk.runtime import Engine
from falkirk.spark.state import KeyedState
from falkirk.testing.expiring import NEW, SIZE, WindowReference, generate

pytestmark = pytest.mark.slow

@dataclass
class Sinks:
    out: MemorySink = field(default_factory=MemorySink)
    expired: MemorySink = field(default_factory=MemorySink)


def pipeline(epochs: int, sinks: Sinks, ttl: int | EventTimeTtl | None, policy: Policy) -> Pipeline:
    p = Pipeline("window-ttl")
    rows = p.source("gen", GeneratorSource("k string, t long, v long", epochs, generate, NEW + 2)).exchange("by_k", "k")
    win = rows.window("win", "k", "t", Tumbling(SIZE), {"n": ("count", None), "s": ("sum", "v")}, policy=policy, ttl=ttl)
    win.sink("out", sinks.out)
    if ttl is not None:
        win.expired().sink("expired_out", sinks.expired)
    return p


def rows_of(sink: MemorySink) -> list[tuple[Any, ...]]:
    return sorted((r["k"], r["window_start"], r["window_end"], r["n"], r["s"], e) for e, rows in sink.epochs.items() for r in rows)


def live_keys(engine: Engine) -> int:
    """The keys the window's state holds now (its current rows)."""
    state = engine.state.operators["win"].state
    assert isinstance(state, KeyedState)
    return state.df.count()


@pytest.mark.parametrize(
    ("ttl", "policy", "restart"),
    [
        pytest.param(4, LazyCheckpoint(every=4), 18, id="epochs-lazy"),
        pytest.param(EventTimeTtl(35), EagerCheckpoint(compact_every=8), 15, id="event-time-eager"),
    ],
)
def test_a_windows_idle_keys_expire_exactly(spark: SparkSession, tmp_path: Path, ttl: int | EventTimeTtl, policy: Policy, restart: int) -> None:
    epochs = 32  # lazy checkpoints every 4: read_state reads the last one, at the last epoch
    want = WindowReference(ttl=ttl if isinstance(ttl, int) else None, span=None if isinstance(ttl, int) else int(ttl.span)).run(epochs)  # type: ignore[arg-type]
    sinks, sizes = Sinks(), []
    for upto in (restart, None):  # a restart from the checkpoints (lazy: replaying epochs 17-18)
        engine = Engine(pipeline(epochs, sinks, ttl, policy), tmp_path / "state", spark=spark)
        engine.on_epoch = lambda epoch, *_, engine=engine: sizes.append((epoch, live_keys(engine))) if epoch % 4 == 0 else None
        engine.run(max_epochs=upto)
    assert rows_of(sinks.out) == sorted(want.out)
    assert rows_of(sinks.expired) == sorted(want.expired)
    # The scenario: new and r keys expire, q keys (back every second epoch) never;
    # windows also close (epoch 21), and a key whose window closed stays
    # until it is idle again.
    assert {k[0] for k, *_ in want.expired} == {"n", "r"} and {k[0] for k, *_ in want.out} == {"n", "r", "q"}
    got = read_state(spark, str(tmp_path / "state"), "win").select("k", "window_start", "window_end", "n", "s")
    assert sorted(map(tuple, got.collect())) == want.open_windows()
    # Flat: the keys held are the rule's at every epoch looked at, a few whatever
    # the number of epochs (without a ttl: three more every epoch until epoch 21).
    assert len(sizes) >= 8 and sizes == [(e, want.live[e]) for e, _ in sizes], sizes
    assert max(want.live.values()) <= 18 < 3 * 20


def test_without_a_ttl_the_same_keys_stay_until_their_windows_close(spark: SparkSession, tmp_path: Path) -> None:
    """The reference is not vacuous: without a ttl nothing expires and every key's
    window closes in ``out`` (the new keys of epochs 1-19 all appear there)."""
    epochs = 22
    want = WindowReference(ttl=10**9).run(epochs)
    sinks = Sinks()
    Engine(pipeline(epochs, sinks, None, EagerCheckpoint()), tmp_path / "state", spark=spark).run()
    assert want.expired == [] and rows_of(sinks.out) == sorted(want.out)
    assert {k for k, *_ in want.out} >= {f"n{b}_0" for b in range(19)}  # epochs 1-19: times 10-190


def test_a_windows_ttl_is_checked(spark: SparkSession, tmp_path: Path) -> None:
    """Refused: a ttl of the other kind than the event time, a non-positive one,
    CEC; a changed ttl without an upgrade."""
    p = Pipeline("bad")
    rows = p.source("gen", GeneratorSource("k string, t long, v long", 3, generate, 4))
    with pytest.raises(GraphError, match="give both as integers"):
        rows.window("a", "k", "t", Tumbling(SIZE), {"n": ("count", None)}, ttl="2 hours")
    with pytest.raises(GraphError, match="positive number of epochs"):
        rows.window("b", "k", "t", Tumbling(SIZE), {"n": ("count", None)}, ttl=0)
    with pytest.raises(GraphError, match="must be an integer >= 1"):
        EventTimeTtl(0)
    with pytest.raises(GraphError, match="not available with ContinuousEventualCheckpoint"):
        Engine(pipeline(3, Sinks(), 2, ContinuousEventualCheckpoint()), tmp_path / "cec", spark=spark).run()
    Engine(pipeline(3, Sinks(), 4, EagerCheckpoint()), tmp_path / "state", spark=spark).run()
    with pytest.raises(PipelineChangedError, match="setting 'ttl' was 4, is now event time 30"):
        Engine(pipeline(3, Sinks(), EventTimeTtl(30), EagerCheckpoint()), tmp_path / "state", spark=spark).run()
