"""A full disk at any write ends the run with one :class:`StorageFullError` line that
names the file system and what to do; once space is freed, a restart recovers
exactly (the whole output is compared with an independent batch computation).

The disks are real: small tmpfs mounts (tests/tmpfs.py), filled once some epochs
have committed, so that Spark's Parquet writers (JVM) and SQLite's commits hit
``ENOSPC`` themselves. An example run on a full disk prints that one line as its
whole error, and exits 2 (docs/how-to/operating.md, exit codes).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from falkirk.demo.clickstream import build_pipeline
from falkirk.runtime import Engine, RunReport
from falkirk.storage import StorageFullError
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from falkirk.testing.verify import differences
from tests.engine.examples import EXAMPLES
from tests.tmpfs import fill, tmpfs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("clicks")
    write_input(directory, files=5, sessions_per_file=20, users=8, seed=5)
    return directory


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", "8m") as mounted:
        yield mounted


def fill_after(epoch: int, directory: Path, fillers: list[Path]) -> Callable[[int, float, RunReport], None]:
    """An ``on_epoch`` that fills ``directory``'s file system once ``epoch`` committed."""

    def on_epoch(done: int, seconds: float, report: RunReport) -> None:
        if done == epoch:
            fillers.append(fill(directory))

    return on_epoch


def chain(exc: BaseException) -> str:
    """Every message of ``exc`` and the exceptions it was raised from."""
    texts = []
    seen: BaseException | None = exc
    while seen is not None:
        texts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(texts)


def check_message(error: StorageFullError, what: str, path: Path) -> None:
    """One line naming ``what`` full at ``path``, how to see it and what to do."""
    message = str(error)
    assert "\n" not in message, message
    assert what in message and str(path) in message, message
    assert f"df -h {path}" in message, message
    assert "start the pipeline again" in message and "nothing committed is lost" in message, message


def assert_whole_output(spark, out: Path, rej: Path, clicks: Path) -> None:  # type: ignore[no-untyped-def]
    assert differences(pd.read_parquet(out), batch_output(spark, str(clicks)), name="output") == []
    assert differences(pd.read_parquet(rej), batch_rejected(spark, str(clicks)), name="rejected") == []


def test_full_sink_table_is_named_and_a_restart_recovers_exactly(spark, clicks: Path, small: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, rej, root = small / "out", tmp_path / "rej", tmp_path / "state"
    fillers: list[Path] = []
    first = Engine(build_pipeline(str(clicks), str(out), str(rej)), root, spark=spark, on_epoch=fill_after(2, small, fillers))
    with pytest.raises(StorageFullError) as raised:
        first.run()
    assert first.report.epochs[:2] == [1, 2] and len(first.report.epochs) < 5
    check_message(raised.value, "sink 'output'", out)
    assert "java.io.IOException: No space left on device" in chain(raised.value)  # Spark's Parquet writer hit it
    fillers[0].unlink()
    report = Engine(build_pipeline(str(clicks), str(out), str(rej)), root, spark=spark).run()
    assert report.recovered is not None and report.epochs[-1] == 5
    assert_whole_output(spark, out, rej, clicks)


def test_full_storage_root_is_named_and_a_restart_recovers_exactly(spark, clicks: Path, small: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, rej, root = tmp_path / "out", tmp_path / "rej", small / "state"
    fillers: list[Path] = []
    first = Engine(build_pipeline(str(clicks), str(out), str(rej)), root, spark=spark, on_epoch=fill_after(2, small, fillers))
    with pytest.raises(StorageFullError) as raised:
        first.run()
    assert first.report.epochs[:2] == [1, 2] and len(first.report.epochs) < 5
    # The next epoch's plan is committed before its work: SQLite hits it first.
    check_message(raised.value, "the metadata database", root / "meta.sqlite")
    assert "OperationalError: database or disk is full" in chain(raised.value)
    fillers[0].unlink()
    report = Engine(build_pipeline(str(clicks), str(out), str(rej)), root, spark=spark).run()
    assert report.recovered is not None and report.epochs[-1] == 5
    assert_whole_output(spark, out, rej, clicks)


def test_an_example_says_a_full_disk_in_one_line_and_exits_2(clicks: Path, small: Path, tmp_path: Path) -> None:
    """No traceback, no JVM stack traces: one ``error:`` line last, exit code 2 (docs/how-to/operating.md)."""
    fill(small)
    args = ["--input", str(clicks), "--output", str(small / "out"), "--storage", str(tmp_path / "state"), "--rejected", str(tmp_path / "rej")]
    done = subprocess.run([sys.executable, str(EXAMPLES / "clickstream.py"), *args], capture_output=True, text=True, timeout=600)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert [line for line in lines if "error:" in line.lower()] == [lines[-1]], done.stderr[-3000:]
    assert lines[-1].startswith(f"clickstream: error: the table of sink 'output' {small / 'out'} is on a full file system ({small}: ")
    assert f"(df -h {small / 'out'})" in lines[-1]
    assert "Traceback" not in done.stderr and "Py4JJavaError" not in done.stderr, done.stderr[-3000:]
    assert not [line for line in lines if line.startswith(("\tat ", "Caused by")) or " ERROR " in line], done.stderr[-3000:]
