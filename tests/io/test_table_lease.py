"""A local Parquet table is written by one driver at a time: a copy of a storage root
started next to its original (or another pipeline) is refused before it writes or
deletes anything in the table (issue 29, finding 1: a copy is a restore, not a fork)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from falkirk.io.exceptions import SinkError
from falkirk.io.sinks import TABLE_LOCK, ParquetTableSink

HOLD = """
import sys, time
from falkirk.io.sinks import ParquetTableSink
ParquetTableSink(sys.argv[1]).take_lease(shared=False)
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_driver_of_a_local_table_is_refused_until_the_first_is_gone(tmp_path: Path) -> None:
    table = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(table)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(SinkError, match="another driver is writing this table"):
            ParquetTableSink(str(table)).take_lease(shared=False)
        ParquetTableSink(str(table)).take_lease(shared=True)  # a driver pair's members share it
        ParquetTableSink(f"file://{table}").drop_lease()
    finally:
        holder.kill()  # SIGKILL: the kernel lets the lock go
        holder.wait()
    sink = ParquetTableSink(f"file://{table}")  # the same table, spelled as a URI
    sink.take_lease(shared=False)
    try:
        with pytest.raises(SinkError, match="this process writes the table already"):
            ParquetTableSink(str(table)).take_lease(shared=False)
    finally:
        sink.drop_lease()
    ParquetTableSink(str(table)).take_lease(shared=False)
    ParquetTableSink(str(table)).drop_lease()
    assert (table / TABLE_LOCK).stat().st_mode & 0o777 == 0o600
