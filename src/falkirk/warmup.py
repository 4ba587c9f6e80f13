"""``falkirk warm-up``: the class-data sharing archive of the driver JVM, built once.

A training run of a small Falkirk pipeline in a JVM that writes the classes it loaded
to an archive at exit (see :mod:`falkirk.spark.cds`, which sessions use to find it).
It belongs to the command line, not to the Spark layer: it runs the whole engine.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from falkirk.spark.cds import QUIET, archive_path, enabled

logger = logging.getLogger(__name__)


def build(timeout: float = 300.0) -> Path | None:
    """Build the archive if it is missing; returns its path, or None if this JVM
    cannot build one (the reason is logged: Falkirk works without it)."""
    path = archive_path()
    if path.is_file() or not enabled():
        return path if path.is_file() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".building-", suffix=".jsa", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # the JVM creates it at exit
    env = {**os.environ, "FALKIRK_CDS": "0"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", f"from falkirk.warmup import train; train({tmp!r})"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 or not Path(tmp).is_file():
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            logger.warning("no class-data sharing archive (exit %s): %s", proc.returncode, " | ".join(tail))
            return None
        os.replace(tmp, path)
        return path
    except subprocess.TimeoutExpired:
        logger.warning("no class-data sharing archive: the training run took over %.0f s", timeout)
        return None
    finally:
        if Path(tmp).exists():
            os.unlink(tmp)


def train(target: str) -> None:
    """The training run (in its own process): a small clickstream pipeline, so the
    archive holds the classes of reading CSV, SQL, joins, aggregates, Python
    workers, Parquet writes and local checkpoints."""
    from falkirk.demo.clickstream import build_pipeline
    from falkirk.runtime import Engine
    from falkirk.spark.session import DEFAULTS, spark_session
    from falkirk.testing.clickstream import write_input

    options = f"{DEFAULTS['spark.driver.extraJavaOptions']} -XX:ArchiveClassesAtExit={target} {QUIET}"
    spark = spark_session(app="falkirk-cds", conf={"spark.driver.extraJavaOptions": options})
    with tempfile.TemporaryDirectory(prefix="falkirk-cds-") as work:
        root = Path(work)
        write_input(root / "in", files=2, sessions_per_file=50, users=10, seed=1)
        pipeline = build_pipeline(str(root / "in"), str(root / "out"), str(root / "rej"), vectorized=True)
        Engine(pipeline, root / "state", spark=spark).run()
    gateway = spark.sparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)  # the JVM: it writes the archive as it exits
    if proc is not None:
        proc.stdin.close()  # the gateway exits when its stdin closes
        proc.wait(timeout=120)

