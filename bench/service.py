"""Experiments on a system running as a service: recovery time and latency.

* :func:`recovery` starts a system on all of a workload's input, SIGKILLs it once
  ``kill_after`` epochs are committed, starts it again at once, and measures the
  time from the SIGKILL to the first output epoch beyond those committed before it
  (JVM and session start, recovery and the epoch included). It also records the
  timeline of committed output rows around the kill.
* :func:`latency` feeds the input files one at a time at a fixed rate and measures,
  per file, the time from its arrival in the input directory to the commit of the
  output epoch that includes it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.systems import STANDBY_READY
from bench.watch import Commit, OutputWatcher

RUNNER = Path(__file__).with_name("runner.py")


def start(spec: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(RUNNER), json.dumps({**spec, "service": True})],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the JVM too, if it outlived the driver
    proc.wait()


@dataclass
class RecoveryResult:
    system: str
    seconds: float  # SIGKILL -> first new committed output after restart
    killed_at: float
    timeline: list[Commit] = field(default_factory=list)


def recovery(spec: dict[str, Any], work: Path, kill_after: int, timeout: float = 600, standby: bool = False) -> RecoveryResult:
    """One SIGKILL-and-restart of ``spec`` (a runner spec without ``work``). With
    ``standby``, a warm standby driver is started once the primary has committed its
    first output, and the kill waits until it is ready; it takes over instead of a
    restart."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = {**spec, "work": str(work)}
    watcher = OutputWatcher(spec["system"], work / "out")
    timeline: list[Commit] = []
    proc = start(spec, work / "stderr.log")
    backup: subprocess.Popen[bytes] | None = None
    ready = work / STANDBY_READY
    deadline = time.time() + timeout
    first = -1
    try:
        while time.time() < deadline:
            timeline += watcher.poll()
            if first < 0 and watcher.seen:
                first = min(watcher.seen)
            if standby and first >= 0 and backup is None:  # the primary holds the lock
                backup = start({**spec, "standby": True}, work / "stderr.log")
            if backup is not None and backup.poll() is not None:
                raise RuntimeError(f"the standby exited early: see {work / 'stderr.log'}")
            if first >= 0 and watcher.last_index() >= first + kill_after and (not standby or ready.exists()):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"{spec['system']} exited early: see {work / 'stderr.log'}")
            time.sleep(0.02)
        else:
            raise TimeoutError(f"{spec['system']} committed too little in {timeout}s")
        before = watcher.last_index()
        killed_at = time.time()
        stop(proc)
        proc = backup if backup is not None else start(spec, work / "stderr.log")
        while time.time() < deadline:
            fresh = watcher.poll()
            timeline += fresh
            if any(c.index > before for c in fresh):
                seconds = min(c.seen for c in fresh if c.index > before) - killed_at
                break
            if proc.poll() is not None:
                raise RuntimeError(f"{spec['system']} exited after restart: see {work / 'stderr.log'}")
            time.sleep(0.02)
        else:
            raise TimeoutError(f"{spec['system']} did not commit new output within {timeout}s of the restart")
        end = time.time() + 5  # a few seconds more of the timeline
        while time.time() < end:
            timeline += watcher.poll()
            time.sleep(0.05)
    finally:
        stop(proc)
        if backup is not None:
            stop(backup)
    return RecoveryResult(spec["system"], seconds, killed_at, timeline)


def latency(
    spec: dict[str, Any], files: list[Path], work: Path, files_per_second: float, timeout: float = 900
) -> list[float]:
    """Seconds from each input file's arrival to the commit of its output epoch."""
    shutil.rmtree(work, ignore_errors=True)
    inbox = work / "in"
    inbox.mkdir(parents=True)
    spec = {**spec, "work": str(work), "input": str(inbox)}
    watcher = OutputWatcher(spec["system"], work / "out")
    proc = start(spec, work / "stderr.log")
    arrivals: dict[str, float] = {}
    try:
        # Wait for the empty start (Falkirk writes an empty table; SS shows nothing),
        # so that start-up time is not counted as latency.
        time.sleep(20)
        if proc.poll() is not None:
            raise RuntimeError(f"{spec['system']} exited early: see {work / 'stderr.log'}")
        t0 = time.time()
        for i, f in enumerate(files):
            due = t0 + i / files_per_second
            while time.time() < due:
                watcher.poll()
                time.sleep(0.005)
            tmp = inbox / f".{f.name}"
            shutil.copyfile(f, tmp)
            os.utime(tmp, (due, due))
            tmp.rename(inbox / f.name)  # atomic arrival
            arrivals[str(inbox / f.name)] = time.time()
        deadline = time.time() + timeout
        while time.time() < deadline:
            watcher.poll()
            if len(_epochs_of(spec, work, arrivals)) == len(arrivals) and all(
                e in watcher.seen for e in _epochs_of(spec, work, arrivals).values()
            ):
                break
            time.sleep(0.05)
    finally:
        stop(proc)
    epochs = _epochs_of(spec, work, arrivals)
    return [watcher.seen[epochs[path]].seen - arrived for path, arrived in arrivals.items() if epochs.get(path) in watcher.seen]


def _epochs_of(spec: dict[str, Any], work: Path, arrivals: dict[str, float]) -> dict[str, int]:
    """Which output epoch holds each input file: Falkirk's committed source offsets,
    or Structured Streaming's file-source log."""
    found: dict[str, int] = {}
    if spec["system"] == "falkirk":
        log = work / "epochs.jsonl"  # written by bench/systems.py as epochs commit
        if not log.exists():
            return found
        for line in log.read_text().splitlines():
            item = json.loads(line)
            for name in item["files"]:
                found[str(work / "in" / name)] = int(item["epoch"])
    else:
        log = work / "checkpoint" / "sources" / "0"
        if not log.exists():
            return found
        for entry in log.iterdir():  # "<n>" and compacted "<n>.compact" files
            if entry.name.startswith("."):
                continue
            for line in entry.read_text().splitlines()[1:]:
                item = json.loads(line)
                found[item["path"].removeprefix("file://")] = int(item["batchId"])
    return found
