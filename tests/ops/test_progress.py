"""Progress: a live display on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

from falkirk.ops.progress import Progress
from falkirk.runtime import RunReport


def report() -> RunReport:
    r = RunReport()
    r.last_records, r.in_flight = 1200, 2
    r.checkpoints.append(("agg", 3, "delta"))
    return r


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Progress("job", stream=out) as progress:
        progress.doing("starting Spark")
        progress.on_epoch(3, 0.5, report())
    lines = out.getvalue().splitlines()
    assert lines[0] == "job: starting Spark"
    assert lines[1].startswith("epoch    3 |    1200 records in  0.50 s =     2400 records/s")
    assert "last checkpoint agg@3 (delta)" in lines[1] and "\x1b[" not in out.getvalue()


def test_a_live_display_on_a_terminal() -> None:
    script = (
        "from falkirk.ops.progress import Progress\n"
        "from falkirk.runtime import RunReport\n"
        "with Progress('job') as p:\n"
        "    p.doing('starting Spark')\n"
        "    p.on_epoch(1, 0.25, RunReport())\n"
    )
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "TERM": "xterm", "COLUMNS": "160"}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=child, stderr=subprocess.PIPE, env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    text = b"".join(chunks).decode(errors="replace")
    assert "\x1b[" in text  # drawn and redrawn in place, not printed line by line
    assert "done: 1 epoch" in text and "job" in text
