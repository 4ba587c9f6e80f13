"""Fencing: a second driver on a storage root in use is refused; SIGKILL frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from falkirk.storage import RootLock, StorageInUseError

HOLD = """
import sys, time
from falkirk.storage import RootLock
lock = RootLock(sys.argv[1]); lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_second_driver_is_refused_until_the_first_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StorageInUseError, match=f"pid {holder.pid}") as info:
            RootLock(tmp_path).acquire()
        assert "stop that driver" in str(info.value)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        deadline = time.monotonic() + 5
        while True:  # the kernel drops the lock with the process
            try:
                with RootLock(tmp_path) as lock:
                    assert lock.held
                break
            except StorageInUseError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        if holder.poll() is None:
            holder.kill()


def test_release_lets_the_next_one_in(tmp_path: Path) -> None:
    first = RootLock(tmp_path)
    first.acquire()
    with pytest.raises(StorageInUseError):
        RootLock(tmp_path).acquire()
    first.release()
    with RootLock(tmp_path):
        pass


def test_a_waiting_standby_takes_the_lock_when_the_holder_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        standby = RootLock(tmp_path)
        taken = threading.Event()
        waiter = threading.Thread(target=lambda: (standby.acquire(wait=True), taken.set()))
        waiter.start()
        assert not taken.wait(0.5), "the standby must wait while the holder lives"
        os.kill(holder.pid, signal.SIGKILL)
        assert taken.wait(10), "the standby did not take the lock after the holder died"
        waiter.join()
        assert standby.held
        with pytest.raises(StorageInUseError, match=f"pid {os.getpid()}"):
            RootLock(tmp_path).acquire()
        standby.release()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
