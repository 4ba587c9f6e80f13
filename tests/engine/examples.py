"""Running an example under test: as a subprocess, optionally armed with a crash point."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from falkirk.testing.visibility import CommittedOnly

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def start(example: str, args: list[str], crash: str | None = None) -> subprocess.Popen[bytes]:
    """``examples/<example>`` with ``args``; ``crash``: ``FALKIRK_CRASH_AT``'s value."""
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    return subprocess.Popen([sys.executable, str(EXAMPLES / example), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes]) -> int:
    """Its exit code once it ends: 0, or -SIGKILL (anything else fails with its stderr)."""
    _, err = proc.communicate(timeout=600)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(err.decode()[-3000:])
    return proc.returncode


def kill_at_each(run: Callable[[str], subprocess.Popen[bytes]], points: Sequence[str], visible: CommittedOnly) -> None:
    """Start ``run(point)`` for each point in turn, each killed there (the n-th time
    that run reaches it, its recovery included), so that each run recovers from the
    previous kill. Fails if a run ends without reaching its point, or if after a kill
    a Parquet table of the root ``visible`` watches shows an epoch never committed to
    it (the same watch through a whole chain of kills: see CommittedOnly)."""
    for point in points:
        assert finish(run(point)) == -signal.SIGKILL, f"{point} was not reached"
        visible.check()
    assert visible.looked, "no table was checked for uncommitted epochs"


def kill_at_a_random_moment(proc: subprocess.Popen[bytes], seconds: float, visible: CommittedOnly) -> int:
    """SIGKILL ``proc`` after ``seconds`` unless it ended before (it may, on a fast
    machine); its exit code, as :func:`finish`. Fails if a Parquet table of the root
    ``visible`` watches then shows an epoch never committed to it."""
    time.sleep(seconds)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    code = finish(proc)
    visible.check()
    return code


def run_example_here(example: str, args: list[str]) -> int:
    """``examples/<example>.py``'s ``main(args)`` in this process (on its Spark
    session, which the example's engine finds): its exit code."""
    spec = importlib.util.spec_from_file_location(f"falkirk_example_{example}", EXAMPLES / f"{example}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(args))
