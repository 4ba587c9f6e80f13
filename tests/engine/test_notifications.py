"""Epoch-completion notifications of stateful operators (``on_epoch_end``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from falkirk.graph import EagerCheckpoint, GraphError, Pipeline
from falkirk.io import FileSource, MemorySink
from falkirk.runtime import Engine

EPOCHS = [["a", "b"], ["a"], ["a"], ["b"]]


def count(key: str, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    seen = int(state["n"].iloc[0]) if len(state) else 0
    return pd.DataFrame(columns=["k", "n", "closed_at"]), pd.DataFrame({"n": [seen + len(rows)]})


def expire(key: str, state: pd.DataFrame, epoch: int) -> tuple[pd.DataFrame, None]:
    """A key idle for one epoch is closed: emit its count, drop its state."""
    return pd.DataFrame({"k": [key], "n": [int(state["n"].iloc[0])], "closed_at": [epoch]}), None


def build(inp: Path, sink: MemorySink) -> Pipeline:
    p = Pipeline("idle")
    src = p.source("src", FileSource(str(inp), "parquet", "k string"))
    src.stateful(
        "idle_keys", "k", count, state_schema="n long", output_schema="k string, n long, closed_at long",
        policy=EagerCheckpoint(), on_epoch_end=expire,
    ).sink("mem", sink)
    return p


@pytest.fixture
def inp(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for i, keys in enumerate(EPOCHS):
        pd.DataFrame({"k": keys}).to_parquet(d / f"e{i}.parquet")
    return d


def closed(sink: MemorySink) -> dict[int, list[tuple[Any, ...]]]:
    return {e: sorted((r["k"], r["n"], r["closed_at"]) for r in rows) for e, rows in sorted(sink.epochs.items())}


def test_idle_keys_are_notified_once_per_complete_epoch(spark, inp: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sink = MemorySink()
    Engine(build(inp, sink), tmp_path / "state", spark=spark).run()
    # b is idle in epoch 2 (closed with 1 row); a is idle in epoch 4 (3 rows); the b
    # of epoch 4 is a new key again.
    assert closed(sink) == {1: [], 2: [("b", 1, 2)], 3: [], 4: [("a", 3, 4)]}


def test_notifications_continue_from_restored_state(spark, inp: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first, second = MemorySink(), MemorySink()
    Engine(build(inp, first), tmp_path / "state", spark=spark).run(max_epochs=2)
    Engine(build(inp, second), tmp_path / "state", spark=spark).run()
    assert closed(first) == {1: [], 2: [("b", 1, 2)]}
    assert closed(second) == {3: [], 4: [("a", 3, 4)]}


def test_on_epoch_end_must_be_a_function(tmp_path: Path) -> None:
    p = Pipeline("bad")
    src = p.source("src", FileSource(str(tmp_path), "parquet", "k string"))
    with pytest.raises(GraphError, match="processor 'idle_keys': on_epoch_end must be a function"):
        src.stateful("idle_keys", "k", count, state_schema="n long", output_schema="k string", on_epoch_end=42)
