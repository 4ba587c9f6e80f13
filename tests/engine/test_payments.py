"""``examples/payments.py``: about 1% of the rows hold a value ``parse`` cannot cast
(ANSI mode, no validation in front of it), which the engine sets aside exactly once.

The whole output - totals, windows and the rows set aside - is compared with plain
Python over the same files (:mod:`falkirk.testing.payments`) after an uninterrupted
run in this process, and after a chain of SIGKILLs: at each crash point of the
isolation (the failing rows found, and written, not committed) and of an epoch's
commit, with input put back, and at a random moment. ``--on-error stop`` exits 2 with
one line naming the processor, the epoch, the file and the value."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.payments import ERRORS_COLUMNS, TOTALS_COLUMNS, WINDOWS_COLUMNS
from falkirk.storage import MetaStore
from falkirk.testing.payments import Expected, expected, expected_by_key, write_input
from falkirk.testing.visibility import CommittedOnly
from tests.engine.examples import (
    kill_at_a_random_moment,
    kill_at_each,
    run_example_here,
)
from tests.engine.examples import start as start_example

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("payments-input") / "in"
    write_input(root, files=5, rows=100, bad_share=0.01, seed=3)
    return root


def timestamp(value: object) -> datetime:
    return pd.Timestamp(value).to_pydatetime().replace(tzinfo=None)  # type: ignore[no-any-return]


def assert_output(out: Path, want: Expected) -> None:
    totals = pd.read_parquet(out / "totals")[TOTALS_COLUMNS]
    assert sorted(map(tuple, totals.values.tolist())) == want.totals
    windows = pd.read_parquet(out / "windows")[WINDOWS_COLUMNS]
    got = sorted((u, timestamp(s), timestamp(e), int(n), int(t)) for u, s, e, n, t in windows.values.tolist())
    assert got == want.windows
    errors = pd.read_parquet(out / "errors")[ERRORS_COLUMNS]
    assert sorted((u, a, t) for u, a, t, _, _ in errors.values.tolist()) == want.errors
    assert set(errors["processor"]) == {"parse"} and all(errors["reason"].str.len() > 0)


def test_an_uninterrupted_run_sets_aside_every_bad_row_once(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    want = expected(files)
    assert len(want.errors) == 5  # 1% of each file's 100 rows
    args = ["--input", str(files), "--output", str(tmp_path / "out"), "--storage", str(tmp_path / "state")]
    assert run_example_here("payments", args) == 0
    assert_output(tmp_path / "out", want)


def test_on_error_stop_exits_2_with_one_line_naming_processor_epoch_file_and_value(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_input(tmp_path / "in", files=1, rows=20, bad_share=0, seed=1)
    bad = tmp_path / "in" / "p-00001.csv"
    bad.write_text("user,amount,ts\nu1,5,2026-11-26 10:15:00\nu2,12x,2026-11-26 10:16:00\n")
    args = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--storage", str(tmp_path / "state"), "--on-error", "stop"]
    assert run_example_here("payments", args) == 2  # in this process: its exit code and its stderr
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("payments:")]
    assert line.startswith("payments: error: processor 'parse' failed on epoch 2's data: [CAST_INVALID_INPUT] The value '12x'")
    assert "input: payments: p-00001.csv" in line


def test_killed_at_each_isolation_and_commit_point_and_at_random_moments(spark: SparkSession, files: Path, tmp_path: Path) -> None:
    """Bad values in a JVM expression (ANSI casts)."""
    out, state, given = tmp_path / "out", tmp_path / "state", tmp_path / "in"
    shutil.copytree(files, given)
    args = ["--input", str(given), "--output", str(out), "--storage", str(state)]
    visible = CommittedOnly(state)
    points = [
        "quarantine.found:1",  # epoch 1's bad rows found, nothing committed yet
        "quarantine.written:1",  # found again and written to the errors sink: not committed
        "commit.after:1",  # epoch 1 committed with the identities of its bad rows: no second search
    ]
    kill_at_each(lambda point: start_example("payments.py", args, point), points, visible)
    # Finding 6: the input files of every committed epoch deleted and put back (a
    # restore from a backup: new modification times); the restarts replay the epochs
    # after the checkpoints from them, comparing their bytes with the committed hashes.
    assert put_back_committed_input(state, given) == 1
    points = ["sink.publish:7"]  # a publish of a later epoch (three sinks publish per commit), replaying put-back input
    kill_at_each(lambda point: start_example("payments.py", args, point), points, visible)
    assert put_back_committed_input(state, given) >= 2  # again, once more epochs committed
    rng = random.Random(7)
    kill_at_a_random_moment(start_example("payments.py", args), rng.uniform(8, 16), visible)
    assert run_example_here("payments", args) == 0  # the last restart: in this process (a new JVM proves nothing more)
    visible.check()
    assert_output(out, expected(given))


def put_back_committed_input(state: Path, given: Path) -> int:
    """Delete and write anew the input files of every epoch the root committed (those
    a recovery may read again, by the offsets kept, and those before them); how many."""
    store = MetaStore(state, read_only=True)
    try:
        committed = store.committed_epoch() or 0
        kept = {f[0] for e, o in store.offsets("payments").items() if o and e <= committed for f in o["files"]}
    finally:
        store.close()
    assert kept, "no committed epoch a recovery may read again"
    names = [path.name for path in sorted(given.iterdir()) if path.name <= max(kept)]
    for name in names:
        content = (given / name).read_bytes()
        (given / name).unlink()
        (given / name).write_bytes(content)
    return len(names)


RUNNER = Path(__file__).with_name("payments_runner.py")
#: The isolation's crash points, each killed at with bad values in each kind of step.
ISOLATION_POINTS = ["quarantine.found:1", "quarantine.written:1"]


def start_variant(variant: str, files: Path, work: Path, crash: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    command = [sys.executable, str(RUNNER), variant, str(files), str(work / "out"), str(work / "state")]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_variant_here(variant: str, files: Path, work: Path) -> int:
    """The runner's ``main`` in this process (on its Spark session): its exit code."""
    from tests.engine import payments_runner

    return payments_runner.main(variant, str(files), str(work / "out"), str(work / "state"))


@pytest.fixture(scope="module")
def few_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("payments-variants") / "in"
    write_input(root, files=3, rows=100, bad_share=0.01, seed=9)
    return root


def test_a_python_function_killed_at_each_isolation_point(spark: SparkSession, few_files: Path, tmp_path: Path) -> None:
    """Bad values in a user's Python function (a UDF raising ValueError): killed at
    each crash point of the isolation (the failing rows found; written, not committed).
    The commit's points are the JVM chain's above."""
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start_variant("udf", few_files, tmp_path, point), ISOLATION_POINTS, visible)
    assert run_variant_here("udf", few_files, tmp_path) == 0
    visible.check()
    assert_output(tmp_path / "out", expected(few_files))


def test_a_keyed_function_killed_at_each_isolation_point(spark: SparkSession, few_files: Path, tmp_path: Path) -> None:
    """Bad values in a keyed processor: a ``stateful`` function raising on a user's
    rows of an epoch sets all of them aside (and the user's state stays as it was)."""
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start_variant("keyed", few_files, tmp_path, point), ISOLATION_POINTS, visible)
    assert run_variant_here("keyed", few_files, tmp_path) == 0
    visible.check()
    want = expected_by_key(few_files)
    assert want.errors and len(want.errors) > len(expected(few_files).errors)  # good rows of a bad user's epoch too
    totals = pd.read_parquet(tmp_path / "out" / "totals")[TOTALS_COLUMNS]
    assert sorted(map(tuple, totals.values.tolist())) == want.totals
    errors = pd.read_parquet(tmp_path / "out" / "errors")
    assert sorted(map(tuple, errors[["user", "amount_text", "ts_text"]].values.tolist())) == want.errors
    assert set(errors["processor"]) == {"totals"} and all(errors["reason"].str.startswith("ValueError: user "))
