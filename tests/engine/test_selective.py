"""Selective rollback in the engine: the paper's Figure 3 (Select -> Sum -> Buffer).

Two epochs are in flight at once and the later one reaches ``buffer`` first (its
state is partitioned by epoch, so it does not wait). The checkpoint of the earlier
epoch A is then selective: it holds A's part and nothing of the later epoch B,
though B's part is in the state already. Killed after A commits, the pipeline rolls
``buffer`` back to "all of A, none of B" and replays B: every sum is held exactly
once and the output is exact. A checkpoint of the whole state at A would have held
B's sum too, and the replay would have added it a second time. And section 3.3's
rule is enforced: a keyed operator whose state is not partitioned by time may not
take a later epoch before an earlier one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from falkirk.graph import GraphError, Pipeline
from falkirk.graph.specs import AggregateSpec
from falkirk.io import FileSource, MemorySink
from falkirk.operators import register
from falkirk.operators.aggregate import AggregateOperator, aggregate_merge, aggregate_prepare
from falkirk.operators.base import Step
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.testing.verify import differences
from falkirk.time.ticks import Tick
from tests.engine.figure3_pipeline import build, write

RUNNER = Path(__file__).with_name("figure3_pipeline.py")
EPOCHS = [["a", "bb"], ["cccc"], ["ddddd", "e"], ["ff"]]
SUMS = pd.DataFrame({"total": [3, 4, 6, 2], "epoch": [1, 2, 3, 4]}).astype("int64")


def held(engine: Engine) -> pd.DataFrame:
    """What ``buffer`` holds: each sum with its epoch."""
    rows = engine.state.operators["buffer"].rows().toPandas()  # type: ignore[attr-defined]
    return rows.rename(columns={"_time": "epoch"})[["total", "epoch"]].astype("int64")


def test_a_later_epoch_overtakes_and_the_checkpoint_holds_only_the_earlier(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "in", EPOCHS)
    engine = Engine(build(str(tmp_path / "in"), str(tmp_path / "out"), slow_epoch=1), tmp_path / "state", spark=spark, max_in_flight=2)
    engine.run()
    assert engine.state.operators["buffer"].arrivals[:2] == [2, 1]  # type: ignore[attr-defined]
    meta = MetaStore(tmp_path / "state", read_only=True)
    first = [files for t, _, files in meta.state_files("buffer") if t == Tick(1)]
    meta.close()
    assert first, "the checkpoint of epoch 1 is kept (the chain's base)"
    in_first = pd.read_parquet([f.path for f in first[0]])
    assert sorted(in_first["_time"]) == [1] and list(in_first["total"]) == [3]  # nothing of epoch 2
    assert differences(pd.read_parquet(tmp_path / "out"), SUMS, name="output") == []
    assert differences(held(engine), SUMS, name="buffer") == []


def test_killed_after_the_earlier_epoch_commits_it_rolls_back_to_all_of_a_none_of_b(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "in", EPOCHS)
    env = {**os.environ, "FALKIRK_CRASH_AT": "commit.after:1"}
    args = [str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "state"), "1"]
    proc = subprocess.run([sys.executable, str(RUNNER), *args], env=env, capture_output=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    engine = Engine(build(str(tmp_path / "in"), str(tmp_path / "out"), slow_epoch=0), tmp_path / "state", spark=spark)
    report = engine.run()
    assert report.recovered_at["buffer"] == 1  # all of epoch 1, none of epoch 2
    assert report.epochs == [2, 3, 4]
    assert differences(held(engine), SUMS, name="buffer") == []  # epoch 2's sum once, not twice
    assert differences(pd.read_parquet(tmp_path / "out"), SUMS, name="output") == []


def test_retained_epochs_are_what_the_buffer_holds(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "in", EPOCHS)
    p = Pipeline("retained")
    words = p.source("words", FileSource(str(tmp_path / "in"), "csv", "word string", options={"header": "true"}))
    words.buffer("buffer", retain=2).sink("out", MemorySink())
    engine = Engine(p, tmp_path / "state", spark=spark)
    engine.run()
    rows = engine.state.operators["buffer"].rows().toPandas()  # type: ignore[attr-defined]
    assert sorted(rows["word"]) == ["ddddd", "e", "ff"]
    with pytest.raises(GraphError, match="retain"):
        words.buffer("bad", retain=0)


@dataclass(frozen=True)
class _RogueSpec(AggregateSpec):
    kind: ClassVar[str] = "rogue"


class _RogueOperator(AggregateOperator):
    """Merges without waiting for the previous epoch: what section 3.3 forbids."""

    spec_type = _RogueSpec

    def step(self, step: Step):  # type: ignore[no-untyped-def]
        partials = aggregate_prepare(self.state, step.inputs[0], self.aggregates, step.version)
        return aggregate_merge(self.state, partials, self.aggregates, step.version)


def test_a_keyed_operator_that_would_take_epochs_out_of_order_is_stopped(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    register(_RogueOperator)
    write(tmp_path / "in", EPOCHS)
    p = Pipeline("rogue")
    words = p.source("words", FileSource(str(tmp_path / "in"), "csv", "word string", options={"header": "true"}))
    words.apply("count", _RogueSpec(key=("word",), aggregates={"n": ("count", None)})).sink("out", MemorySink())
    with pytest.raises(GraphError, match="without waiting for the previous one"):
        Engine(p, tmp_path / "state", spark=spark).run()
