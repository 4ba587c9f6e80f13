"""The stream-stream join, against a plain-Python reference of its contract: every
pair with equal keys whose rows are both alive in the later one's arrival epoch is
emitted exactly once, in that epoch; left/full joins emit a row that met no match in
the last epoch it waits. Also across a checkpoint and restore."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from falkirk.graph import GraphError, LazyCheckpoint
from falkirk.graph.specs import JoinSpec
from falkirk.spark.files import write_parquet
from falkirk.storage import LocalFileSystem

Row = tuple[Any, ...]


def reference(left: list[list[Row]], right: list[list[Row]], how: str, retain: int | None) -> dict[int, list[Row]]:
    """What the join must emit per epoch (1-based), computed without Spark."""
    window = retain if retain is not None else 10**9
    ls = [(e + 1, k, v) for e, rows in enumerate(left) for k, v in rows]
    rs = [(e + 1, k, v) for e, rows in enumerate(right) for k, v in rows]
    out: dict[int, list[Row]] = {e + 1: [] for e in range(len(left))}
    for a, k, lv in ls:
        for b, k2, rv in rs:
            if k == k2 and abs(a - b) <= window - 1:
                out[max(a, b)].append((k, lv, rv))
    if how in ("left", "full"):
        for a, k, lv in ls:
            if not any(k == k2 and abs(a - b) <= window - 1 for b, k2, _ in rs) and a + window - 1 in out:
                out[a + window - 1].append((k, lv, None))
    if how == "full":
        for b, k, rv in rs:
            if not any(k == k2 and abs(a - b) <= window - 1 for a, k2, _ in ls) and b + window - 1 in out:
                out[b + window - 1].append((k, None, rv))
    return {e: sorted(rows, key=repr) for e, rows in out.items()}


def random_sides(seed: int, epochs: int = 7) -> tuple[list[list[Row]], list[list[Row]]]:
    rng = random.Random(seed)
    left = [[(rng.choice("abcde"), rng.randrange(100)) for _ in range(rng.randrange(4))] for _ in range(epochs)]
    right = [[(rng.choice("abcde"), rng.randrange(100)) for _ in range(rng.randrange(4))] for _ in range(epochs)]
    return left, right


def run(harness, spec: JoinSpec, left, right, *, policy=None) -> dict[int, list[Row]]:  # type: ignore[no-untyped-def]
    h = harness(spec, "k string, lv long", "k string, rv long", policy=policy)
    got = {}
    for e, (lrows, rrows) in enumerate(zip(left, right, strict=True)):
        got[e + 1] = sorted(((r["k"], r["lv"], r["rv"]) for r in h.step(lrows, rrows)), key=repr)
    return got


@pytest.mark.parametrize(
    # each kind of join once, with and without retention (each case is ~40 s of CI's clock)
    ("how", "retain", "seed"), [("inner", None, 1), ("left", 3, 4), ("full", 2, 5)]
)
def test_join_matches_the_reference(harness, how: str, retain: int | None, seed: int) -> None:  # type: ignore[no-untyped-def]
    left, right = random_sides(seed)
    assert run(harness, JoinSpec(on=("k",), how=how, retain=retain), left, right) == reference(left, right, how, retain)


@pytest.mark.parametrize(("how", "retain"), [("full", 3)])  # (full: both sides' unmatched rows)
def test_unmatched_rows_survive_the_compaction_of_the_state(harness, how: str, retain: int) -> None:  # type: ignore[no-untyped-def]
    """Adversarial review: compaction (every 8 runs) dropped the rows in their last
    epoch before the join emitted the unmatched ones among them: sparse keys over 12
    epochs, each epoch's output compared with the reference."""
    rng = random.Random(11)
    left = [[(rng.choice("abcdefgh"), rng.randrange(100)) for _ in range(rng.randrange(1, 3))] for _ in range(12)]
    right = [[(rng.choice("abcdefgh"), rng.randrange(100)) for _ in range(rng.randrange(0, 2))] for _ in range(12)]
    assert run(harness, JoinSpec(on=("k",), how=how, retain=retain), left, right) == reference(left, right, how, retain)


def test_join_survives_a_checkpoint_and_restore(harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    left, right = random_sides(7, epochs=8)
    spec = JoinSpec(on=("k",), how="full", retain=3)
    want = reference(left, right, "full", 3)
    first = harness(spec, "k string, lv long", "k string, rv long", policy=LazyCheckpoint())
    chain = []
    for e in range(1, 6):
        assert sorted(((r["k"], r["lv"], r["rv"]) for r in first.step(left[e - 1], right[e - 1])), key=repr) == want[e]
        if e in (2, 4, 5):  # base at 2, deltas after
            rows = first.operator.checkpoint(e, base=e == 2)
            chain.append((e, "base" if e == 2 else "delta", write_parquet(rows, str(tmp_path), f"e{e}", LocalFileSystem())))
    second = harness(spec, "k string, lv long", "k string, rv long", policy=LazyCheckpoint())
    second.operator.restore(chain, 4)  # as if it failed after epoch 5 and rolled back to 4
    second.epoch = 4
    for e in range(5, 9):
        got = sorted(((r["k"], r["lv"], r["rv"]) for r in second.step(left[e - 1], right[e - 1])), key=repr)
        assert got == want[e], f"epoch {e}"


def test_join_schemas_and_errors(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(JoinSpec(on=("k",), how="left", retain=2), "k string, lv long", "k string, rv long, w string")
    assert [(f.name, f.nullable) for f in h.outputs["out"].fields][1:] == [("lv", True), ("rv", True), ("w", True)]
    with pytest.raises(GraphError, match=r"columns \['v'\] are on both sides"):
        harness(JoinSpec(on=("k",)), "k string, v long", "k string, v long")
    with pytest.raises(GraphError, match="'k' is string on the left and bigint on the right"):
        harness(JoinSpec(on=("k",)), "k string, a long", "k long, b long")
    with pytest.raises(GraphError, match="give retain=N"):
        JoinSpec(on=("k",), how="left")
    with pytest.raises(GraphError, match="how must be one of"):
        JoinSpec(on=("k",), how="cross")
