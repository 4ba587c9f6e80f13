"""The window operator run by hand, epoch by epoch, against the plain-Python
reference (falkirk.testing.windowed): tumbling, sliding and session windows,
append and update modes, late and invalid rows, and the final epoch."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import SparkSession

from falkirk.graph import (
    GraphError,
    Input,
    Processor,
    Session,
    Sliding,
    Stateless,
    Tumbling,
    WindowShape,
)
from falkirk.graph.windows import WindowSpec
from falkirk.operators import Step, operator_for
from falkirk.testing.windowed import Windows

SCHEMA = "word string, ts long, v long"
SHAPES: dict[str, WindowShape] = {"tumbling": Tumbling(10), "sliding": Sliding(12, 4), "session": Session(5)}


def epochs_of(seed: int, n: int = 6) -> list[list[tuple[Any, ...]]]:
    rng = random.Random(seed)
    out = []
    for e in range(n):
        rows: list[tuple[Any, ...]] = [(rng.choice("abcd"), e * 10 + rng.randint(-30, 10), rng.randint(1, 9)) for _ in range(25)]
        rows += [(None, 5, 1), ("a", None, 1)]
        out.append(rows)
    return out


def run(spark: SparkSession, shape: WindowShape, mode: str, epochs: list[list[tuple[Any, ...]]], delay: int) -> tuple[list[list[tuple[Any, ...]]], Any]:
    spec = WindowSpec(key=("word",), time="ts", shape=shape, aggregates={"n": ("count", None), "total": ("sum", "v")}, watermark_delay=delay, mode=mode)
    op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
    schema = spark.createDataFrame([], SCHEMA).schema
    op.set_up([schema])
    outputs = []
    for e, rows in enumerate([*epochs, []], 1):
        out = op.step(Step(e, [spark.createDataFrame(rows, schema)], final=e == len(epochs) + 1))
        outputs.append(sorted((r["window_start"], r["window_end"], r["word"], r["n"], r["total"]) for r in out["out"].collect()))
        outputs[-1].append(("late", sorted((r["word"], r["ts"], r["reason"][:5]) for r in out["late"].collect() if r["word"] and r["ts"] is not None)))
        op.release(e)
    return outputs, op


def reference(shape: WindowShape, mode: str, epochs: list[list[tuple[Any, ...]]], delay: int) -> list[list[tuple[Any, ...]]]:
    """Counts and sums: the reference counts rows, so run it once per unit of v."""
    out = []
    counting, summing = Windows(shape, delay), Windows(shape, delay)
    for e, rows in enumerate([*epochs, []], 1):
        valid = [(ts, w) for w, ts, _ in rows if w is not None and ts is not None]
        weighted = [(ts, w) for w, ts, v in rows if w is not None and ts is not None for _ in range(v)]
        before = counting.closed_at
        final = e == len(epochs) + 1
        closed, closed_sum = counting.epoch(valid, final), summing.epoch(weighted, final)
        if mode == "append":
            pairs = zip(sorted(closed), sorted(closed_sum), strict=True)
        else:
            pairs = zip(counting.updated, summing.updated, strict=True)
        rows_out: list[tuple[Any, ...]] = [(s, en, w, c, t) for (s, en, w, c), (_, _, _, t) in pairs]
        late = []
        for w, ts, _ in rows:
            if w is None or ts is None or before is None:
                continue
            ends = [ts + shape.gap] if isinstance(shape, Session) else [en for _, en in _windows(ts, shape)]
            late += [(w, ts, "late:") for en in ends if en <= before]
        out.append([*sorted(rows_out), ("late", sorted(late))])
    return out


def _windows(ts: int, shape: WindowShape) -> list[tuple[int, int]]:
    from falkirk.testing.windowed import windows_of

    return windows_of(ts, shape)


#: Every shape, each mode; sessions (which merge and close) in both modes.
CASES = [("tumbling", "update"), ("sliding", "append"), ("session", "append"), ("session", "update")]


@pytest.mark.parametrize(("shape", "mode"), CASES)
def test_every_epoch_matches_the_reference(spark: SparkSession, shape: str, mode: str) -> None:
    epochs = epochs_of(seed=len(shape) + len(mode))
    got, op = run(spark, SHAPES[shape], mode, epochs, delay=6)
    want = reference(SHAPES[shape], mode, epochs, delay=6)
    assert sum(len(e) for e in want) > 20 and any(e[-1][1] for e in want)  # windows and late rows: a test that can fail
    assert got == want
    info = op.describe()
    assert info["invalid_rows"] == 2 * len(epochs)
    assert info["late_rows"] == sum(len(e[-1][1]) for e in want)


def test_refuses_what_it_cannot_window(spark: SparkSession) -> None:
    with pytest.raises(GraphError, match="integer"):
        spec = WindowSpec(key=("word",), time="t", shape=Tumbling(5), aggregates={"n": ("count", None)})
        op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
        op.set_up([spark.createDataFrame([], "word string, t double").schema])
    with pytest.raises(GraphError, match="slide"):
        Sliding(5, 10)
    with pytest.raises(GraphError, match="median"):
        WindowSpec(key=("w",), time="t", shape=Session(3), aggregates={"m": ("median", "v")})
    with pytest.raises(GraphError, match="taken"):
        WindowSpec(key=("w",), time="t", shape=Session(3), aggregates={"window_start": ("count", None)})


def _summary(key: Any, start: int, end: int, rows: Any) -> Any:
    import pandas as pd

    return pd.DataFrame({"n": [len(rows)], "total": [int(rows["v"].sum())], "first_ts": [int(rows["ts"].min())]})


@pytest.mark.parametrize(("shape", "mode"), [("session", "append"), ("sliding", "update")])
def test_a_user_function_over_the_window_rows(spark: SparkSession, shape: str, mode: str) -> None:
    epochs = epochs_of(seed=7)
    spec = WindowSpec(key=("word",), time="ts", shape=SHAPES[shape], watermark_delay=6, mode=mode, fn=_summary, output_schema="n long, total long, first_ts long")
    op = operator_for(Processor("w", spec, (Input("in", "out"),), Stateless()), spark)
    schema = spark.createDataFrame([], SCHEMA).schema
    outputs = op.set_up([schema])
    assert outputs["out"].fieldNames() == ["word", "window_start", "window_end", "n", "total", "first_ts"]
    want = reference(SHAPES[shape], mode, epochs, delay=6)
    for e, rows in enumerate([*epochs, []], 1):
        out = op.step(Step(e, [spark.createDataFrame(rows, schema)], final=e == len(epochs) + 1))
        got = sorted((r["window_start"], r["window_end"], r["word"], r["n"], r["total"]) for r in out["out"].collect())
        assert got == want[e - 1][:-1]
        for r in out["out"].collect():
            assert r["window_start"] <= r["first_ts"] < r["window_end"]
        op.release(e)
    with pytest.raises(GraphError, match="not both"):
        WindowSpec(key=("w",), time="t", shape=Session(3), aggregates={"n": ("count", None)}, fn=_summary, output_schema="n long")
