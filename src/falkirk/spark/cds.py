"""Class-data sharing for the driver JVM: a faster start, hence faster recovery.

Most of a fresh Spark session's start is the JVM loading and verifying some 20,000
classes of Spark and its libraries, and its first jobs interpret code that later
runs compiled. A *dynamic class-data sharing archive* (JDK 13+) holds those classes
pre-parsed; with it, on this 2-core machine, a session starts in ~2.0 s instead of
~3.7 s and its first job takes ~0.8 s instead of ~2.0 s. A restart after a crash
pays both, so recovery is ~3 s faster.

The archive is built once per installation by :func:`build` (``scripts/bootstrap.sh``
runs ``falkirk warm-up``): a short training run of a Falkirk pipeline in
a JVM started with ``-XX:ArchiveClassesAtExit``, written to a temporary name and
renamed into place, so a reader sees a whole archive or none. Sessions then start
with ``-XX:SharedArchiveFile`` (:func:`java_options`). The JVM checks the archive
against its own version and class path and ignores it when they differ; a
missing archive only costs the time it would have saved. ``FALKIRK_CDS=0`` turns it
off. The archive lives under ``$FALKIRK_CACHE`` (default ``~/.cache/falkirk``),
keyed by the PySpark installation and the Java runtime.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

#: JVM options that keep the JVM quiet about an archive it cannot use.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def enabled() -> bool:
    return os.environ.get("FALKIRK_CDS", "1") != "0"


def _java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if home:
        return home
    java = shutil.which("java")
    return str(Path(java).resolve().parent.parent) if java else ""


def archive_path() -> Path:
    """Where this installation's archive is (whether or not it exists yet)."""
    import pyspark

    key = "\n".join([pyspark.__version__, str(Path(pyspark.__file__).resolve().parent), _java_home(), sys.executable])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("FALKIRK_CACHE", Path.home() / ".cache" / "falkirk"))
    return cache / "cds" / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options() -> str:
    """Driver JVM options that use the archive, or "" when there is none."""
    if not enabled():
        return ""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.is_file() else ""


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
            [sys.executable, "-c", f"from falkirk.spark.cds import train; train({tmp!r})"],
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
    from falkirk.demo.clickstream import build_pipeline, write_input
    from falkirk.runtime import Engine
    from falkirk.spark.session import DEFAULTS, spark_session

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

