"""Progress: a live display on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import logging
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from falkirk.graph import Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine, RunReport
from falkirk.runtime.progress import Progress


def report() -> RunReport:
    r = RunReport()
    r.last_records, r.in_flight = 1200, 2
    r.checkpoints.append(("agg", 3, "delta"))
    return r


def test_after_a_restart_the_restored_checkpoint_is_the_last_one_until_one_is_written() -> None:
    r = RunReport(restored_checkpoints=[("agg", 4), ("sessions", 6)])
    assert r.last_checkpoint() == "sessions@6 (restored)"
    r.checkpoints.append(("agg", 7, "delta"))
    assert r.last_checkpoint() == "agg@7 (delta)" and RunReport().last_checkpoint() is None


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Progress("job", stream=out) as progress:
        progress.doing("starting Spark")
        progress.on_epoch(3, 0.5, report())
    lines = out.getvalue().splitlines()
    assert lines[0] == "job: starting Spark"
    assert lines[1] == "job: epoch 3 · 1,200 rows in 0.5 s · 2,400 rows/s · ckpt agg@3 · 2 in flight"
    assert "\x1b[" not in out.getvalue() and max(len(line) for line in lines) < 80


def test_a_live_display_on_a_terminal() -> None:
    script = (
        "from falkirk.runtime.progress import Progress\n"
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


def parquet_input(spark: SparkSession, where: Path, files: int, rows: int) -> None:
    """``files`` Parquet files of ``rows`` rows (a format whose rows no line count gives)."""
    for i in range(files):
        spark.range(rows).selectExpr("cast(id % 7 as string) as k", "id as v").coalesce(1).write.parquet(str(where / f"part-{i}"))
        [data] = (where / f"part-{i}").glob("*.parquet")
        data.rename(where / f"f{i}.parquet")
        shutil.rmtree(where / f"part-{i}")


def counted_pipeline(tmp_path: Path) -> Pipeline:
    p = Pipeline("counted")
    src = p.source("src", FileSource(str(tmp_path / "in"), "parquet", "k string, v long"))
    src.aggregate("sums", "k", {"n": ("count", None)}).sink("out", ParquetTableSink(str(tmp_path / "out")))
    return p


def test_off_a_terminal_nothing_per_epoch_unless_asked_and_then_rows_as_spark_read_them(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "in").mkdir()
    parquet_input(spark, tmp_path / "in", files=3, rows=500)
    quiet = Engine(counted_pipeline(tmp_path), tmp_path / "quiet", spark=spark).run(max_epochs=1)
    assert capsys.readouterr().out == "" and quiet.records is None  # a service's log stays clean; nothing counted
    shown = Engine(counted_pipeline(tmp_path), tmp_path / "shown", spark=spark, progress=True).run(max_epochs=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("counted: starting on ")
    assert [line[:31] for line in lines[1:]] == ["counted: epoch 1 · 500 rows in ", "counted: epoch 2 · 500 rows in "]
    assert shown.records == 1000 and "1,000 input rows" in str(shown)
    with caplog.at_level(logging.INFO, logger="falkirk.progress"):
        logged = Engine(counted_pipeline(tmp_path), tmp_path / "logged", spark=spark).run()
    said = [r.getMessage() for r in caplog.records if r.name == "falkirk.progress"]
    assert [m[:31] for m in said] == [f"counted: epoch {e} · 500 rows in " for e in (1, 2, 3)]
    assert logged.records == 1500 and capsys.readouterr().out == ""


def test_a_run_on_a_terminal_shows_a_live_line_by_default(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"k": "x", "v": 1}\n{"k": "y", "v": 2}\n')
    script = (  # two runs, the second a recovery that logs a warning (its handler writes to the terminal)
        "import logging, sys\n"
        "logging.basicConfig(format='%(levelname)s %(name)s: %(message)s')\n"
        "from falkirk.graph import Pipeline\n"
        "from falkirk.io import FileSource, ParquetTableSink\n"
        "from falkirk.runtime import Engine\n"
        "p = Pipeline('tty')\n"
        "src = p.source('src', FileSource(sys.argv[1] + '/in', 'json', 'k string, v long'))\n"
        "src.aggregate('agg', 'k', {'n': ('count', None)}).sink('out', ParquetTableSink(sys.argv[1] + '/out'))\n"
        "Engine(p, sys.argv[1] + '/state').run()\n"
        "open(sys.argv[1] + '/in/b.json', 'w').write('{\"k\": \"z\", \"v\": 3}\\n')\n"
        "Engine(p, sys.argv[1] + '/state').run()\n"
    )
    main, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=child, stderr=subprocess.PIPE, env=env)
    os.close(child)
    text = read_all(main).decode(errors="replace")
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    assert "\x1b[" in text and "tty" in text  # drawn in place
    assert "rows in" in text and "done: 1 epoch" in text
    # The log's line is printed above the live line, not glued to its end.
    at = text.index("WARNING falkirk.coordinator.rollback: recovered:")
    assert text[:at].endswith(("\n", "\r\x1b[2K")), repr(text[at - 60 : at])


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)
