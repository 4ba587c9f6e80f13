"""The recovery coordinator's counting of in-process restarts (path 4): a run gives up
after MAX_LOSSES restarts in a row with no commit between them, and each call of
Engine.run counts afresh (Spark-free: the coordinator is driven directly)."""

from __future__ import annotations

import pytest

from falkirk.control.barriers import BarrierClock
from falkirk.coordinator.coordinator import RecoveryCoordinator
from falkirk.coordinator.losses import MAX_LOSSES
from falkirk.execution.observer import Observer
from falkirk.execution.report import RunReport
from falkirk.graph import GraphError, Pipeline
from falkirk.io import MemorySink, keyed_generator

LOST = RuntimeError("org.apache.spark.SparkException: ExecutorLostFailure (executor 1 exited)")


def coordinator() -> RecoveryCoordinator:
    p = Pipeline("p")
    p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1)).sink("out", MemorySink())
    return RecoveryCoordinator(RunReport(), Observer(p, None), BarrierClock(None))


def test_restarts_without_a_commit_give_up_after_the_limit() -> None:
    c = coordinator()
    for _ in range(MAX_LOSSES):
        assert c.restart_in_process(LOST, 0, None) is None
    with pytest.raises(GraphError, match="giving up"):
        c.restart_in_process(LOST, 0, None)


def test_each_run_counts_its_restarts_afresh() -> None:
    """A run that gave up leaves no count behind for the next run of the same engine."""
    c = coordinator()
    for _ in range(MAX_LOSSES):
        c.restart_in_process(LOST, 0, None)
    c.new_run()
    for _ in range(MAX_LOSSES):
        assert c.restart_in_process(LOST, 0, 10) == 10


def test_an_error_that_is_no_executor_loss_is_raised_as_it_is() -> None:
    c = coordinator()
    other = ValueError("a bug")
    with pytest.raises(ValueError, match="a bug"):
        c.restart_in_process(other, 0, None)
