"""What the driver's JVM prints: no start-up banner, its errors, and nothing from a
JVM whose driver was killed (falkirk.spark.console)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from falkirk.spark.console import NOISE, copy_lines

#: Starts a session, has the JVM log one error, starts a job that runs for minutes
#: (a JVM killed under it says so at length), says so and waits to be killed.
SCRIPT = """
import sys, threading
from falkirk.spark.session import spark_session
spark = spark_session("local[2]")
spark._jvm.org.apache.logging.log4j.LogManager.getLogger("falkirk.test").error("an error the user must see")
threading.Thread(target=lambda: spark.range(10**13).selectExpr("sum(id % 7)").collect(), daemon=True).start()
print(spark.sparkContext._gateway.proc.pid, flush=True)
threading.Event().wait()
"""


def test_a_killed_driver_leaves_only_the_jvms_errors_on_stderr(tmp_path: Path) -> None:
    err = tmp_path / "stderr"
    with err.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=sink)
        assert proc.stdout is not None
        jvm = int(proc.stdout.readline())
        time.sleep(3)  # the job's tasks are running
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 60
    while Path(f"/proc/{jvm}").exists() and time.monotonic() < deadline:  # the JVM dies once it sees its stdin closed
        time.sleep(0.2)
    assert not Path(f"/proc/{jvm}").exists(), "the killed driver's JVM is still running"
    lines = err.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith("ERROR test: an error the user must see"), lines


def test_noise_lines_are_left_out_and_every_other_line_is_copied() -> None:
    read, write = os.pipe()
    out_read, out_write = os.pipe()
    copier = threading.Thread(target=copy_lines, args=(os.fdopen(read, "rb"), out_write))
    copier.start()
    text = (
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n"
        b"26/11/27 16:50:52 ERROR Executor: Exception in task 0.0\n"
        b"Setting default log level to \"WARN\".\n"
        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n"
        b"  at org.apache.spark.Something(Something.scala:1)\n"
    )
    os.write(write, text)
    os.close(write)
    copier.join(10)
    os.close(out_write)
    copied = os.fdopen(out_read, "rb").read().decode()
    assert copied == "26/11/27 16:50:52 ERROR Executor: Exception in task 0.0\n  at org.apache.spark.Something(Something.scala:1)\n"
    assert NOISE.match("Using Spark's default log4j profile: x") and not NOISE.match("ERROR Using Spark's")


def test_ctrl_c_while_spark_starts_is_one_short_traceback() -> None:
    script = "from falkirk.spark.session import spark_session\nprint('starting', flush=True)\nspark_session('local[2]')\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"starting\n"
    time.sleep(1.0)  # the JVM is starting
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    lines = err.decode().splitlines()
    assert lines[-1] == "KeyboardInterrupt: interrupted while Spark was starting: nothing ran", lines
    assert len(lines) < 20 and not any("py4j" in line or "socket" in line for line in lines), lines


#: Where Ctrl-C comes in the script below: as the SparkContext has just started
#: (PySpark's own handler is then in place), and in the middle of the engine's set-up
#: (py4j calls after the session is up). Each used to print pages of py4j tracebacks.
LATE_INTERRUPTS = {
    "context-started": "falkirk.spark.session.quiet_task_failures",
    "engine-set-up": "falkirk.runtime.engine.engine_session",
}


@pytest.mark.parametrize("where", sorted(LATE_INTERRUPTS))
def test_ctrl_c_late_in_the_start_is_held_then_one_short_traceback(where: str, tmp_path: Path) -> None:
    module, _, name = LATE_INTERRUPTS[where].rpartition(".")
    script = (
        "import importlib, os, signal, time\n"
        f"m = importlib.import_module({module!r})\n"
        f"original = m.{name}\n"
        "def interrupted(*args):\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # arrives in the middle\n"
        "    time.sleep(0.2)\n"
        "    return original(*args)\n"
        f"m.{name} = interrupted\n"
        "from falkirk.graph import Pipeline\n"
        "from falkirk.io import MemorySink, keyed_generator\n"
        "from falkirk.runtime import Engine\n"
        "p = Pipeline('late')\n"
        "p.source('src', keyed_generator(batches=2, rows_per_batch=3, keys=2)).sink('out', MemorySink())\n"
        f"Engine(p, {str(tmp_path / 'state')!r})\n"
        "print('not interrupted')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    )  # fmt: skip
    lines = proc.stderr.decode().splitlines()
    assert b"not interrupted" not in proc.stdout
    assert lines and lines[-1].startswith("KeyboardInterrupt: interrupted while "), lines
    assert len(lines) < 20 and not any("py4j" in line or "reentrant" in line for line in lines), lines
    assert proc.returncode in (130, -signal.SIGINT), proc.returncode
