"""A restart's recovery in plain words (issue 33: the paper's notation only, before)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from falkirk.coordinator.story import recovery_in_words
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine


def test_keyed_processors_name_their_checkpoints_and_the_epochs_computed_again() -> None:
    frontier = {"events": 7, "parse": 7, "user_totals": 5, "sessions": 6, "out": 7}
    said = recovery_in_words(frontier, {"user_totals", "sessions"}, 7, {"by_user.out>user_totals": [6, 7]})
    assert said == (
        "sessions restarts from its checkpoint at epoch 6; user_totals restarts from its checkpoint at epoch 5, "
        "so epochs 6-7 are computed again (by_user.out>user_totals re-sent from its log); nothing committed is written twice"
    )


def test_the_plain_cases() -> None:
    assert recovery_in_words({"a": 0}, set(), None, {}) == "nothing was committed before: the pipeline starts at its first epoch"
    assert recovery_in_words({"a": 4, "b": 4}, {"b"}, 4, {}) == "every processor stands at the last committed epoch (4): nothing is computed again"
    assert recovery_in_words({"a": 3, "agg": 0}, {"agg"}, 4, {}) == (
        "agg restarts from an empty state (it had no checkpoint), so epochs 1-4 are computed again; nothing committed is written twice"
    )
    assert recovery_in_words({"a": 3, "b": 4}, set(), 4, {}) == "a resumes after epoch 3, so epoch 4 is computed again; nothing committed is written twice"


def test_a_restart_that_computes_epochs_again_says_so_by_default_and_one_that_does_not_only_at_info(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "in").mkdir()
    for i in range(1, 4):
        (tmp_path / "in" / f"e{i}.json").write_text(f'{{"k": "x", "v": {i}}}\n')

    def build(policy: object) -> Pipeline:
        p = Pipeline("told")
        src = p.source("src", FileSource(str(tmp_path / "in"), "json", "k string, v long"))
        src.aggregate("agg", "k", {"n": ("count", None)}, policy=policy).sink("out", ParquetTableSink(str(tmp_path / "out")))
        return p

    for root, policy in (("lazy", LazyCheckpoint(every=2)), ("eager", EagerCheckpoint())):
        Engine(build(policy), tmp_path / root, spark=spark).run()
    with caplog.at_level(logging.INFO, logger="falkirk"):
        Engine(build(LazyCheckpoint(every=2)), tmp_path / "lazy", spark=spark).run()  # agg's checkpoint is at epoch 2: epoch 3 again
        Engine(build(EagerCheckpoint()), tmp_path / "eager", spark=spark).run()
    told = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("recovered: ")]
    assert told == [
        (logging.WARNING, "recovered: agg restarts from its checkpoint at epoch 2, so epoch 3 is computed again; nothing committed is written twice"),
        (logging.INFO, "recovered: every processor stands at the last committed epoch (3): nothing is computed again"),
    ]
    assert logging.getLogger("py4j").level == logging.WARNING  # no "Closing down clientserver connection" at INFO


def test_a_checkpoint_that_cannot_be_used_is_said_with_the_reason() -> None:
    """(Issue 33 review: "(it had no checkpoint)" was said of a processor that had
    one, unusable because a Stateless window beside it reads the input from epoch 1.)"""
    said = recovery_in_words(
        {"events": 0, "per_user": 0, "per_min": 0}, {"per_user", "per_min"}, 8, {},
        checkpoints={"per_user": 6}, rebuilders={"per_min": "Stateless"},
    )  # fmt: skip
    assert said == (
        "per_min rebuilds its state from every input since epoch 1 (Stateless persists nothing); per_user restarts "
        "from an empty state: its checkpoint at epoch 6 cannot be used, because per_min must read every input since "
        "epoch 1 again, and per_user reads the same input, so epochs 1-8 are computed again; nothing committed is written twice"
    )
    elsewhere = recovery_in_words({"agg": 3}, {"agg"}, 5, {}, checkpoints={"agg": 4})
    assert elsewhere.startswith("agg restarts from its checkpoint at epoch 3: its checkpoint at epoch 4 cannot be used, because a consistent restart")
