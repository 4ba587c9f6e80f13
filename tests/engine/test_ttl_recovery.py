"""State time-to-live through SIGKILLs: a window (``ttl=4`` epochs, lazy checkpoints)
and an aggregate (``ttl=5``, eager) over the same keys (``tests/engine/ttl_runner.py``)
are killed as an epoch is computed, right after a commit and
at a random moment, each run recovering from the previous kill; the last run ends
in this process. Every row of the four Parquet tables (both outputs, both
``expired()``) equals a plain-Python run of the rules: a replay expires exactly the
keys the committed epochs expired, in the same epochs, once."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.testing.expiring import WindowReference, aggregate_reference
from falkirk.testing.visibility import CommittedOnly
from tests.engine import ttl_runner
from tests.engine.examples import kill_at_a_random_moment, kill_at_each

pytestmark = pytest.mark.slow

EPOCHS = 26
RUNNER = Path(__file__).with_name("ttl_runner.py")


def start(work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    command = [sys.executable, str(RUNNER), str(work / "out"), str(work / "state"), str(EPOCHS)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def table(work: Path, name: str, *columns: str) -> list[tuple[Any, ...]]:
    frame = pd.read_parquet(work / "out" / name)
    return sorted(map(tuple, frame[[*columns, "epoch"]].values.tolist()))


def test_expiring_keys_killed_at_each_step(spark: SparkSession, tmp_path: Path) -> None:
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(tmp_path, point), ["epoch.computed:6", "commit.after:7"], visible)
    kill_at_a_random_moment(start(tmp_path), random.Random(34).uniform(12.0, 20.0), visible)
    assert ttl_runner.main(str(tmp_path / "out"), str(tmp_path / "state"), EPOCHS) == 0
    visible.check()
    window = WindowReference(ttl=ttl_runner.WINDOW_TTL).run(EPOCHS)
    assert table(tmp_path, "windows", "k", "window_start", "window_end", "n", "s") == sorted(window.out)
    assert table(tmp_path, "windows_expired", "k", "window_start", "window_end", "n", "s") == sorted(window.expired)
    out, expired = aggregate_reference(EPOCHS, ttl_runner.AGGREGATE_TTL)
    assert table(tmp_path, "counts", "k", "n", "s") == out
    assert table(tmp_path, "counts_expired", "k", "n", "s") == expired
    assert window.expired and expired  # keys did expire, in both, across the kills
