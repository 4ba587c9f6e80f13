"""How a command ends: one line and its exit code; with -v the whole trace too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from falkirk.exceptions import FalkirkError
from falkirk.runtime import RunAbandoned, exit_code, failed


def test_an_error_is_one_line_and_exit_2_and_the_trace_only_when_verbose(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        try:
            raise ValueError("the JVM's own words")
        except ValueError as cause:
            raise FalkirkError("processor 'parse' failed on epoch 2's data") from cause
    except FalkirkError as exc:
        error = exc
    assert failed("demo", error) == 2
    assert capsys.readouterr().err == "demo: error: processor 'parse' failed on epoch 2's data\n"
    assert failed("demo", error, verbose=True) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "the JVM's own words" in err and err.endswith("demo: error: processor 'parse' failed on epoch 2's data\n")


def test_a_signal_ends_with_128_plus_its_number(capsys: pytest.CaptureFixture[str]) -> None:
    assert failed("demo", RunAbandoned("SIGTERM: abandoned", "SIGTERM")) == 143
    assert capsys.readouterr().err == "demo: SIGTERM: abandoned\n"
    assert (exit_code(None), exit_code("stop()"), exit_code("SIGINT"), exit_code("SIGTERM")) == (0, 0, 130, 143)


def test_a_signal_that_stopped_the_jvm_too_is_said_even_when_the_error_cannot_say_itself() -> None:
    from falkirk.runtime.stopping import StopRequest

    class AsksTheJvm(Exception):  # a Py4JJavaError fetches its text from the JVM
        def __str__(self) -> str:
            raise ConnectionRefusedError(111, "Connection refused")

    request = StopRequest()
    request.begin()
    request.ask("SIGTERM")
    abandoned = request.jvm_gone(AsksTheJvm())
    assert abandoned.signal_name == "SIGTERM" and exit_code(abandoned.signal_name) == 143
    assert str(abandoned).startswith("SIGTERM: the epochs in flight could not finish (AsksTheJvm: its text is in the JVM, which is gone)")


def test_a_storage_root_that_cannot_be_written_is_refused_before_spark_starts(tmp_path: Path) -> None:
    # Newcomer finding: a read-only root gave a raw OSError on falkirk.lock after 8 s of Spark start-up.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    code = (
        "from pyspark import SparkContext\n"
        "from falkirk.graph import Pipeline\n"
        "from falkirk.io import FileSource, MemorySink\n"
        "from falkirk.runtime import Engine\n"
        "from falkirk.storage.exceptions import StorageError\n"
        "p = Pipeline('p')\n"
        f"p.source('src', FileSource({str(tmp_path)!r}, 'json', 'name string')).sink('out', MemorySink())\n"
        "try:\n"
        f"    Engine(p, {str(blocker / 'state')!r})\n"
        "except StorageError as exc:\n"
        "    print('refused:', exc)\n"
        "print('spark started:', SparkContext._active_spark_context is not None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"refused: storage root '{blocker / 'state'}' cannot be written (" in done.stdout
    assert "Give Engine a directory this user can create and write" in done.stdout
    assert "spark started: False" in done.stdout
